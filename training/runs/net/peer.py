"""Can this node reach the rendezvous host? Name, route, MTU, store port, clock, socket interface.

A multi-node job that cannot rendezvous waits, by default, ten minutes or more and then prints a
timeout. Each check here names one thing that fails between two hosts, in seconds:

    report = check_peer("10.0.0.1:29400")          # on every other node (mgtutor doctor --peer)
    serve(29400)                                   # on the rendezvous host (mgtutor doctor --serve)

`serve` answers each probe (peer_probe.py: the wire format) with its clock, hostname, the address it saw the probe come from and
the MTU of the interface it came in on, so a probe also measures clock skew. Headless.
"""
from __future__ import annotations

import ipaddress
import os
import socket
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import psutil

from mgtutor.training.runs.net.peer_probe import PROBE_TAG, probe_answer, serve_probes, tcp_probe

__all__ = ["PROBE_TAG", "PeerReport", "check_peer", "serve", "tcp_probe"]

DEFAULT_PORT = 29400
SKEW_WARN_S = 1.0
SKEW_FAIL_S = 10.0  # torchrun's rendezvous compares heartbeat times written by other nodes' clocks


@dataclass
class PeerCheck:
    name: str
    status: str  # ok | warn | fail | skip
    detail: str
    fix: str = ""


@dataclass
class Route:
    """Where packets to `dest` leave this machine: source address, its interface and MTU."""
    dest: str
    source: str | None
    iface: str | None
    mtu: int | None
    loopback: bool


@dataclass
class PeerReport:
    endpoint: str
    host: str
    port: int
    checks: list[PeerCheck] = field(default_factory=list)
    route: Route | None = None
    served: dict[str, Any] | None = None

    @property
    def ok(self) -> bool:
        return not any(c.status == "fail" for c in self.checks)

    def first_failure(self) -> PeerCheck | None:
        return next((c for c in self.checks if c.status == "fail"), None)

    def to_dict(self) -> dict[str, Any]:
        return {"endpoint": self.endpoint, "host": self.host, "port": self.port, "ok": self.ok,
                "route": asdict(self.route) if self.route else None, "served": self.served,
                "checks": [asdict(c) for c in self.checks]}


def parse_endpoint(text: str, default_port: int = DEFAULT_PORT) -> tuple[str, int]:
    """HOST:PORT, HOST or [IPv6]:PORT -> (host, port); ValueError says what is wrong."""
    text = text.strip()
    if not text:
        raise ValueError("empty endpoint: give HOST:PORT, for example 10.0.0.1:29400")
    if text.startswith("["):
        host, _, rest = text[1:].partition("]")
        port_text = rest[1:] if rest.startswith(":") else ""
    elif text.count(":") == 1:
        host, port_text = text.split(":")
    else:
        host, port_text = text, ""
    if not host:
        raise ValueError(f"no host in {text!r}: give HOST:PORT")
    if not port_text:
        return host, default_port
    if not port_text.isdigit() or not 0 < int(port_text) < 65536:
        raise ValueError(f"bad port in {text!r}: the port is a number from 1 to 65535")
    return host, int(port_text)


def resolve(host: str) -> list[str]:
    """IPv4 addresses first (torch's store and gloo try them first), without duplicates."""
    infos = socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)
    addrs = [str(i[4][0]) for i in infos]
    ordered = [a for a in addrs if ":" not in a] + [a for a in addrs if ":" in a]
    return list(dict.fromkeys(ordered))


def interface_of(address: str) -> str | None:
    """The interface that holds `address` on this machine, or None."""
    for name, addrs in psutil.net_if_addrs().items():
        if any(a.address.split("%")[0] == address for a in addrs):
            return name
    return None


def interface_mtu(iface: str | None) -> int | None:
    stats = psutil.net_if_stats().get(iface or "")
    return stats.mtu if stats else None


def route_to(dest: str) -> Route:
    """The kernel's choice of source address for `dest` (a UDP connect sends nothing)."""
    family = socket.AF_INET6 if ":" in dest else socket.AF_INET
    source: str | None = None
    try:
        with socket.socket(family, socket.SOCK_DGRAM) as sock:
            sock.connect((dest, 9))
            source = str(sock.getsockname()[0])
    except OSError:
        pass
    iface = interface_of(source) if source else None
    loopback = bool(source) and ipaddress.ip_address((source or "").split("%")[0]).is_loopback
    return Route(dest=dest, source=source, iface=iface, mtu=interface_mtu(iface), loopback=loopback)


def local_addresses() -> list[tuple[str, str]]:
    """(interface, IPv4 address) of every interface that is up, loopback last."""
    stats = psutil.net_if_stats()
    found = []
    for name, addrs in psutil.net_if_addrs().items():
        if stats.get(name) and not stats[name].isup:
            continue
        found += [(name, a.address) for a in addrs if a.family == socket.AF_INET]
    return sorted(found, key=lambda pair: (pair[1].startswith("127."), pair[0]))


def is_local(host: str) -> bool:
    """Whether `host` names this machine (one of its interface addresses)."""
    try:
        addrs = resolve(host)
    except OSError:
        return False
    mine = {a for _, a in local_addresses()}
    return any(a in mine or ipaddress.ip_address(a.split("%")[0]).is_loopback for a in addrs)


def ifname_matches(spec: str, iface: str) -> bool:
    """NCCL/GLOO_SOCKET_IFNAME syntax: comma list of prefixes, `=` exact, `^` excludes."""
    spec = spec.strip()
    exclude = spec.startswith("^")
    spec = spec.lstrip("^")
    exact = spec.startswith("=")
    names = [n.strip() for n in spec.lstrip("=").split(",") if n.strip()]
    hit = any(iface == n if exact else iface.startswith(n) for n in names)
    return hit != exclude


def _ifname_checks(route: Route, env: dict[str, str], backend_hint: str | None = None) -> list[PeerCheck]:
    """Whether gloo/NCCL will use the interface that reaches the peer."""
    checks = []
    iface = route.iface
    for var in ("GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME"):
        spec = env.get(var)
        if not spec or not iface:
            continue
        if ifname_matches(spec, iface):
            checks.append(PeerCheck(f"{var}", "ok", f"{var}={spec} includes {iface}, the interface that reaches the peer"))
        else:
            checks.append(PeerCheck(f"{var}", "fail", f"{var}={spec} does not include {iface}, the interface "
                                    f"that reaches the peer", fix=f"export {var}={iface}"))
    if not env.get("GLOO_SOCKET_IFNAME") and iface and not route.loopback:
        host = socket.gethostname()
        try:
            host_addr = resolve(host)[0]
        except (OSError, IndexError):
            host_addr = None
        host_iface = interface_of(host_addr) if host_addr else None
        if host_iface == iface:
            checks.append(PeerCheck("GLOO_SOCKET_IFNAME", "ok", f"unset; gloo uses the address of "
                                    f"hostname {host} ({host_addr}), which is on {iface}"))
        else:
            where = f"{host_addr} ({host_iface or 'not an address of this machine'})" if host_addr else "nothing"
            checks.append(PeerCheck("GLOO_SOCKET_IFNAME", "warn", f"unset; gloo would use hostname {host} -> "
                                    f"{where}, not {iface} that reaches the peer",
                                    fix=f"export GLOO_SOCKET_IFNAME={iface} (mgtutor run sets it for you)"))
    return checks


def check_peer(endpoint: str, timeout: float = 3.0, env: dict[str, str] | None = None) -> PeerReport:
    """Every check from this node towards the rendezvous endpoint, stopping where one makes the rest moot."""
    env = dict(os.environ if env is None else env)
    host, port = parse_endpoint(endpoint)
    report = PeerReport(endpoint=f"{host}:{port}", host=host, port=port)
    add = report.checks.append
    try:
        addrs = resolve(host)
    except OSError as exc:
        add(PeerCheck("resolve", "fail", f"cannot resolve {host}: {exc}",
                      fix="use the rendezvous host's IP address, or add the name to /etc/hosts on every node"))
        return report
    addr = addrs[0]
    if addr == host:
        add(PeerCheck("resolve", "ok", f"{host} is an address"))
    else:
        add(PeerCheck("resolve", "ok", f"{host} -> {', '.join(addrs)}"))
    route = route_to(addr)
    report.route = route
    if route.source is None:
        add(PeerCheck("route", "fail", f"no route from this machine to {addr}",
                      fix="check the address, or add a route (ip route) to the rendezvous host's network"))
        return report
    if route.loopback and not is_local(host):
        add(PeerCheck("route", "warn", f"{addr} is a loopback address: other nodes cannot use it",
                      fix="give the rendezvous host's address on the network the nodes share"))
    else:
        add(PeerCheck("route", "ok", f"to {addr} from {route.source} on {route.iface or '?'}"))
    status, detail, served, t0, malformed = tcp_probe(addr, port, timeout)
    fixes = {
        "refused": f"start node 0 first (it hosts the store on port {port}), or run `mgtutor doctor --serve "
                   f"--port {port}` there; check that the port is the one node 0 was given",
        "timeout": f"a firewall drops traffic to port {port}: open it between the nodes (e.g. `nft add rule "
                   f"inet filter input tcp dport {port} accept`), or check that {addr} is really node 0",
        "unreachable": f"{addr} cannot be reached: wrong address, or the hosts share no network",
    }
    add(PeerCheck("tcp", "ok" if status == "open" else "fail", detail, fix=fixes.get(status, "")))
    if route.mtu is not None:
        remote_mtu = (served or {}).get("mtu")
        if remote_mtu and remote_mtu != route.mtu:
            add(PeerCheck("mtu", "warn", f"{route.iface} MTU {route.mtu}, the peer's interface MTU {remote_mtu}",
                          fix="set the same MTU on both ends (ip link set DEV mtu N); mismatches stall large messages"))
        else:
            add(PeerCheck("mtu", "ok", f"{route.iface} MTU {route.mtu}" + (" (same on the peer)" if remote_mtu else "")))
    if served:
        report.served = {k: v for k, v in served.items() if not k.startswith("_")}
        rtt = served["_received"] - t0
        skew = float(served["time"]) - (t0 + served["_received"]) / 2
        detail = f"peer clock {skew:+.3f} s from this one (±{rtt / 2:.3f} s)"
        level = "fail" if abs(skew) >= SKEW_FAIL_S else "warn" if abs(skew) >= SKEW_WARN_S else "ok"
        add(PeerCheck("clock", level, detail, fix="" if level == "ok" else "synchronise clocks (chrony/ntp) on every node"))
    elif status == "open":
        add(PeerCheck("clock", "skip", f"{malformed}: the port answers, but not as `mgtutor doctor --serve` "
                      "(the store itself?); clock skew not measured"))
    report.checks += _ifname_checks(route, env)
    return report


def serve(port: int = DEFAULT_PORT, bind: str = "0.0.0.0", count: int | None = None,
          idle_timeout: float | None = None,
          on_probe: Callable[[dict[str, Any]], None] | None = None,
          on_ready: Callable[[int], None] | None = None) -> int:
    """Answer probes on `bind`:`port` until `count` probes or `idle_timeout` s without one (peer_probe
    says what counts); returns probes served. OSError (e.g. EADDRINUSE) propagates: the caller says
    who holds the port."""
    family = socket.AF_INET6 if ipaddress.ip_address(bind).version == 6 else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as listener:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((bind, port))
        listener.listen(16)
        if on_ready:
            on_ready(listener.getsockname()[1])
        return serve_probes(listener, lambda conn, addr: probe_answer(conn, addr, interface_of, interface_mtu),
                            count=count, idle_timeout=idle_timeout, on_probe=on_probe)
