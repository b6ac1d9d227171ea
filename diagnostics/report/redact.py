"""What a report may not carry: secrets always, host names and addresses when asked.

A report is made to be handed on. Secrets are the run layer's one redactor (`SecretRedactor`,
training/foundation/secrets.py): a variable whose name looks secret is shown as `<redacted>`; its value, the
values the run had at launch (the record's keyed hashes) and anything shaped like a secret (a token
prefix, a Bearer header, a URL's password, `--api-key X`) are taken out of any text (a script that
printed its token, a stack that shows an argument). `--redact-hosts` replaces
each host name and address the record knows (the host, the rendezvous endpoint, MASTER_ADDR, the
ranks' hosts) and any other non-loopback IP address by a stable placeholder: `host-1`, `addr-1`.
"""
from __future__ import annotations

import ipaddress
import os
import re
import socket
from collections.abc import Iterable, Mapping

from mgtutor.training.runs.records.record import RunMeta
from mgtutor.training.foundation.secrets import SecretRedactor, secret_values

MIN_HOST = 2  # a host called "vm" is still a name; it is replaced as a whole word only
IPV4 = re.compile(r"(?<![\w.])(?:\d{1,3}\.){3}\d{1,3}(?![\w.])")
IPV6 = re.compile(r"(?<![\w:.])(?:[0-9A-Fa-f]{1,4}:){2,7}[0-9A-Fa-f]{1,4}(?![\w:])|"
                  r"(?<![\w:.])[0-9A-Fa-f]{1,4}(?::[0-9A-Fa-f]{1,4})*::(?:[0-9A-Fa-f]{1,4}:)*[0-9A-Fa-f]{1,4}(?![\w:])")


class Redactor:
    """Cleans every string a report shows; `hosts=True` for --redact-hosts."""

    def __init__(self, hosts: bool = False, environ: Mapping[str, str] | None = None) -> None:
        self.hosts = hosts
        self.secrets = SecretRedactor()
        self.names: dict[str, str] = {}  # host name -> host-N
        self.addresses: dict[str, str] = {}  # address -> addr-N
        self.versions: set[str] = set()  # "9.1.0.70" is cuDNN's version, not an address
        self._names_re: re.Pattern[str] | None = None
        self.learn_secrets(os.environ if environ is None else environ)
        if hosts:
            self.learn_hosts([socket.gethostname(), socket.getfqdn()])

    def learn_secrets(self, env: Mapping[str, str]) -> None:
        self.secrets.learn_env(env)

    def learn_record(self, meta: RunMeta) -> None:
        """The secrets a run had at launch (keyed hashes) and those its command line gave."""
        self.secrets.learn_digests(meta.secret_digests)
        self.secrets.learn_values(secret_values({}, [str(arg) for arg in meta.target]))

    def learn_hosts(self, values: Iterable[str | None]) -> None:
        if not self.hosts:
            return
        for value in values:
            if not value:
                continue
            host = value.rsplit(":", 1)[0] if value.count(":") == 1 else value  # HOST:PORT
            host = host.strip("[]")
            if self._is_address(host):
                self._address(host)
            elif len(host) >= MIN_HOST and host not in ("localhost", "localhost.localdomain"):
                for name in {host, host.split(".", 1)[0]}:
                    if len(name) >= MIN_HOST and name not in self.names:
                        self.names[name] = f"host-{len(self.names) + 1}"
        names = sorted(self.names, key=len, reverse=True)
        self._names_re = re.compile(r"(?<![\w-])(?:" + "|".join(map(re.escape, names)) + r")(?![\w-])") if names else None

    def learn_versions(self, values: Iterable[object]) -> None:
        self.versions.update(str(v) for v in values if isinstance(v, str))

    @staticmethod
    def _is_address(text: str) -> bool:
        try:
            ipaddress.ip_address(text)
        except ValueError:
            return False
        return True

    def _address(self, text: str) -> str:
        try:
            ip = ipaddress.ip_address(text)
        except ValueError:
            return text
        if ip.is_loopback or ip.is_unspecified or text in self.versions:
            return text  # 127.0.0.1 says nothing about where the machine is
        if isinstance(ip, ipaddress.IPv6Address) and sum(1 for part in text.split(":") if part) < 3:
            return text  # "c10d::ops" is C++, not an address
        return self.addresses.setdefault(text, f"addr-{len(self.addresses) + 1}")

    def text(self, value: str) -> str:
        return self._hosts_only(self.secrets.text(value))

    def env(self, env: Mapping[str, str]) -> dict[str, str]:
        """The variables with secret-looking ones `<redacted>`, every value cleaned."""
        return {k: self._hosts_only(v) for k, v in self.secrets.env(env).items()}

    def _hosts_only(self, value: str) -> str:
        if not self.hosts:
            return value
        value = IPV4.sub(lambda m: self._address(m.group(0)), value)
        value = IPV6.sub(lambda m: self._address(m.group(0)), value)
        return self._names_re.sub(lambda m: self.names[m.group(0)], value) if self._names_re is not None else value
