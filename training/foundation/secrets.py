"""Secrets: which variables may be kept or shown, and the one redactor for text made to be shown.

A name is secret when one of its parts (split on `_`, `-`, `.` and camelCase) is a secret word:
`DB_PASS`, `GH_PAT`, `SENTRY_DSN`, `apiKey` are; `MONKEY`, `AUTHOR`, `KEYBOARD_LAYOUT`,
`TOKENIZERS_PARALLELISM` are not. Text is cleaned two ways (`SecretRedactor.text`):
- by shape, whoever made it: known token prefixes (ghp_, github_pat_, sk-, hf_, xoxb-, AKIA…),
  `Authorization: Bearer …`, URL credentials (`scheme://user:pass@`), `--api-key X`/`--token=X`,
  `password: X` and `NAME=value` with a secret-looking name;
- by value: the values of the secret-named variables a run had at launch. The run record keeps only
  keyed hashes of them (HMAC-SHA256 with a key of its own, `secret_digests` in meta.json), compared
  with the words of the text, so a report made from another shell finds them without any file
  holding them in clear. A value shorter than 8 characters or boolean-like (true, 0, yes) is never
  looked for: it would blank out ordinary words.
Every pattern here is linear in a line's length (no nested or unbounded retried runs).
"""
from __future__ import annotations

import functools
import hashlib
import hmac
import re
import secrets as _random
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

REDACTED = "<redacted>"
MIN_VALUE = 8  # a shorter value is never looked for by value (shapes still hide it)
MAX_DIGESTS = 256
BOOLEAN_LIKE = frozenset({"", "true", "false", "yes", "no", "on", "off", "0", "1", "none", "null", "y", "n"})

_SECRET_PARTS = frozenset({
    "TOKEN", "KEY", "KEYS", "SECRET", "SECRETS", "PASSWORD", "PASSWORDS", "PASSWD", "PASS", "PASSPHRASE",
    "CREDENTIAL", "CREDENTIALS", "CREDS", "AUTH", "COOKIE", "COOKIES", "PRIVATE", "PAT", "DSN", "WEBHOOK",
    "APIKEY", "SESSIONID", "BEARER",
})
# A part written in one word with the secret at its end: HFTOKEN, DBPASSWORD, OPENAIAPIKEY.
_SECRET_ENDINGS = ("TOKEN", "SECRET", "PASSWORD", "PASSWD", "APIKEY")
# A connection URL of a service that takes a password in it: DATABASE_URL, REDIS_URI, CELERY_BROKER_URL.
_URL_PARTS = frozenset({"URL", "URI", "DSN"})
_URL_SERVICES = frozenset({"DATABASE", "DB", "REDIS", "MONGO", "MONGODB", "POSTGRES", "POSTGRESQL", "PG", "MYSQL",
                           "AMQP", "BROKER", "CELERY", "SQLALCHEMY", "RABBITMQ", "CONNECTION"})
# A name that ends in one of these says what kind of thing it holds, not the secret: KEY_FILE, TOKEN_LENGTH,
# KeyError.
_NOT_SECRET_LAST = frozenset({"FILE", "PATH", "DIR", "LENGTH", "LEN", "SIZE", "BITS", "TYPE", "ERROR",
                              "EXCEPTION", "WARNING", "COUNT", "LIMIT", "ID", "IDS"})
_PARTS = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")


def name_parts(name: str) -> list[str]:
    """`AWS_SECRET_ACCESS_KEY` -> AWS SECRET ACCESS KEY; `apiKey` -> API KEY; `--hf-token` -> HF TOKEN."""
    return [part.upper() for part in _PARTS.findall(name)]


@functools.lru_cache(maxsize=4096)
def looks_secret(name: str) -> bool:
    """True when a variable's (or an option's) name says its value is a secret."""
    parts = name_parts(name)
    if not parts:
        return False
    if len(parts) > 1 and parts[-1] in _NOT_SECRET_LAST and not (parts[-1] == "ID" and "ACCESS" in parts):
        return False  # TOKEN_FILE, KeyError, RUN_ID; AWS_ACCESS_KEY_ID stays hidden
    if any(p in _SECRET_PARTS for p in parts):
        return True
    if any(p.endswith(_SECRET_ENDINGS) and len(p) > 6 for p in parts):
        return True
    return any(p in _URL_PARTS for p in parts) and any(p in _URL_SERVICES for p in parts)


def worth_looking_for(value: str) -> bool:
    """Whether a secret's value is long and unusual enough to be taken out of any text by value."""
    return len(value) >= MIN_VALUE and value.strip().lower() not in BOOLEAN_LIKE and value != REDACTED


def _hidden_value(value: str) -> bool:
    """Whether a value next to a secret name (`password: X`) is hidden: not a boolean, not a small number."""
    bare = value.strip("\"'")
    if bare.lower() in BOOLEAN_LIKE or bare.startswith(REDACTED):
        return False
    return not (bare.isdigit() and len(bare) < MIN_VALUE)


# --- shapes ---------------------------------------------------------------------------------------
_PREFIXED = re.compile(
    r"(?<![A-Za-z0-9_-])(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}|sk-[A-Za-z0-9_-]{16,}"
    r"|hf_[A-Za-z0-9]{16,}|xox[abposr]-[A-Za-z0-9-]{10,}|(?:AKIA|ASIA)[0-9A-Z]{16}|glpat-[A-Za-z0-9_-]{20,}"
    r"|AIza[0-9A-Za-z_-]{35}|npm_[A-Za-z0-9]{36})")
_AUTH_HEADER = re.compile(r"(?i)(?<![\w-])((?:proxy-)?authorization[\"']?\s{0,8}[:=]\s{0,8}[\"']?"
                          r"(?:(?:bearer|basic|token|digest|apikey)\s{1,8})?)([^\s\"',;]+)")
_BEARER = re.compile(r"(?<![\w-])((?:Bearer|Basic|bearer|BEARER)\s{1,8})([A-Za-z0-9._~+/=-]{16,})")
_URL_USERINFO = re.compile(r"://([^\s/@:\"'<>]{0,256}):([^\s/@\"'<>]{1,512})@")
_OPTION = re.compile(r"(?<![\w-])(--?[A-Za-z][\w.-]{0,63})(=|\s{1,8})([^\s\"'-][^\s\"']*|\"[^\"\n]{0,512}\"|'[^'\n]{0,512}')")
# Only `name:` / `name=` is matched; the value is read after it, and only for a secret name: in
# `config: password: X` the match at `config` must not swallow `password:`, the name that follows.
_NAME_VALUE = re.compile(r"(?<![\w.-])([A-Za-z_][\w.-]{0,63})([\"']?[ \t]{0,8}[:=][ \t]{0,8}[\"']?)")
_VALUE = re.compile(r"[^\s\"',;{}()\[\]]{1,512}")
_WORD = re.compile(r"[^\s\"'`,;()\[\]{}<>|]{%d,}" % MIN_VALUE)
_PIECES = re.compile(r"[=:@/]")


def _by_shape(text: str) -> str:
    if not text:
        return text
    text = _PREFIXED.sub(REDACTED, text)
    text = _AUTH_HEADER.sub(lambda m: m.group(1) + (REDACTED if not m.group(2).startswith(REDACTED) else m.group(2)),
                            text)
    text = _BEARER.sub(lambda m: m.group(1) + REDACTED, text)
    text = _URL_USERINFO.sub(lambda m: f"://{m.group(1)}:{REDACTED}@", text)
    text = _OPTION.sub(_option, text)
    return _name_values(text)


def _option(m: re.Match[str]) -> str:
    name, sep, value = m.group(1), m.group(2), m.group(3)
    if looks_secret(name.lstrip("-")) and _hidden_value(value):
        return f"{name}{sep}{REDACTED}"
    return m.group(0)


def _name_values(text: str) -> str:
    out: list[str] = []
    pos = 0
    for m in _NAME_VALUE.finditer(text):
        if m.start() < pos:
            continue  # inside a value already hidden
        name, sep = m.group(1), m.group(2)
        if not looks_secret(name):
            continue
        found = _VALUE.match(text, m.end())
        value = found.group(0) if found else ""
        if sep == ":" and value.startswith("//"):
            continue  # token://host is no `name: value`
        if _hidden_value(value):
            out += [text[pos:m.end()], REDACTED]
            pos = m.end() + len(value)
    return "".join(out) + text[pos:] if out else text


# --- values, kept as keyed hashes ---------------------------------------------------------------
def _digest(key: bytes, value: str) -> str:
    return hmac.new(key, value.encode("utf-8", "surrogateescape"), hashlib.sha256).hexdigest()


def secret_values(env: Mapping[str, str], argv: Sequence[str] = ()) -> list[str]:
    """The values to look for: secret-named variables', and those given to a secret option in argv."""
    found = [v for k, v in env.items() if looks_secret(k) and isinstance(v, str) and worth_looking_for(v)]
    for i, arg in enumerate(argv):
        if not arg.startswith("-"):
            continue
        name, eq, value = arg.partition("=")
        if not eq and i + 1 < len(argv):
            value = argv[i + 1]
        if looks_secret(name.lstrip("-")) and worth_looking_for(value):
            found.append(value)
    return found


def secret_digests(values: Iterable[str]) -> dict[str, Any]:
    """What a run record keeps of its secrets: a random key and the HMAC of each value under it."""
    key = _random.token_bytes(16)
    digests = sorted({_digest(key, v) for v in values if worth_looking_for(v)})[:MAX_DIGESTS]
    return {"hmac": "sha256", "key": key.hex(), "digests": digests} if digests else {}


class SecretRedactor:
    """Takes secrets out of text: by shape, by the values it was told, by a record's digests."""

    def __init__(self, environ: Mapping[str, str] | None = None) -> None:
        self.values: set[str] = set()
        self.digests: list[tuple[bytes, frozenset[str]]] = []
        if environ is not None:
            self.learn_env(environ)

    def learn_env(self, env: Mapping[str, str]) -> None:
        self.values.update(secret_values(env))

    def learn_values(self, values: Iterable[str]) -> None:
        self.values.update(v for v in values if worth_looking_for(v))

    def learn_digests(self, recorded: Any) -> None:
        """A record's `secret_digests` (anything else found there is ignored)."""
        if not isinstance(recorded, Mapping) or recorded.get("hmac") != "sha256":
            return
        key, digests = recorded.get("key"), recorded.get("digests")
        if not isinstance(key, str) or not isinstance(digests, list):
            return
        try:
            raw = bytes.fromhex(key)
        except ValueError:
            return
        known = frozenset(d for d in digests[:MAX_DIGESTS] if isinstance(d, str))
        if known:
            self.digests.append((raw, known))

    def text(self, value: str) -> str:
        for secret in sorted(self.values, key=len, reverse=True):
            if secret in value:
                value = value.replace(secret, REDACTED)
        if self.digests:
            value = _WORD.sub(self._word, value)
        return _by_shape(value)

    def _known(self, candidate: str) -> bool:
        return len(candidate) >= MIN_VALUE and any(_digest(key, candidate) in known for key, known in self.digests)

    def _word(self, m: re.Match[str]) -> str:
        word = m.group(0)
        for candidate in _candidates(word):
            if self._known(candidate):
                word = word.replace(candidate, REDACTED)
        return word

    def env(self, env: Mapping[str, str]) -> dict[str, str]:
        """The variables with secret-named ones `<redacted>`, every other value cleaned (URL credentials)."""
        return {k: REDACTED if looks_secret(k) else self.text(v) for k, v in env.items()}

    def argv(self, argv: Sequence[str]) -> list[str]:
        """A command line with the value of every secret option hidden (`--api-key X`, `--token=X`)."""
        out: list[str] = []
        hide_next = False
        for arg in argv:
            if hide_next and _hidden_value(arg):
                out.append(REDACTED)
                hide_next = False
                continue
            hide_next = False
            name, eq, _value = arg.partition("=")
            if arg.startswith("-") and looks_secret(name.lstrip("-")):
                if eq:
                    out.append(f"{name}={REDACTED}" if _hidden_value(_value) else arg)
                    continue
                hide_next = True
            out.append(self.text(arg))
        return out


def _candidates(word: str) -> list[str]:
    """A word and the parts a secret may be in: after `=` or `:`, between `:`/`@`/`/`, a final `.` off."""
    out = [word, word.rstrip(".")]
    for sep in ("=", ":"):
        if sep in word:
            out.append(word.split(sep, 1)[1])
    out += [piece for piece in _PIECES.split(word) if len(piece) >= MIN_VALUE]
    return list(dict.fromkeys(c for c in out if len(c) >= MIN_VALUE))


def redact_text(text: str, environ: Mapping[str, str] | None = None) -> str:
    """Shapes only (and the values of `environ`'s secret-named variables, when given)."""
    return SecretRedactor(environ).text(text)


def redact_env(env: Mapping[str, str]) -> dict[str, str]:
    """The same variables, with every secret-looking value replaced by `<redacted>` and credentials in
    the others' values (a URL's password in NCCL_*/MASTER_*) taken out."""
    return {k: (REDACTED if looks_secret(k) else _by_shape(v) if isinstance(v, str) else v) for k, v in env.items()}
