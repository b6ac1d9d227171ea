"""`mgtutor doctor --peer HOST:PORT` and `--serve [--port P]`: the checks between two nodes.

On the rendezvous host run `--serve`; on every other node `--peer` that host's address. The
probe names the first thing that fails — name, route, store port, MTU, clock, socket interface —
instead of a ten-minute rendezvous timeout. Both modes slot into `mgtutor doctor`'s mode list.
"""
from __future__ import annotations

import argparse
import errno
import ipaddress
import json
import socket
import sys

from mgtutor.training.runs.net import peer
from mgtutor.training.foundation.i18n import N_, _
from mgtutor.tui.commands.options import add_listen_port
from mgtutor.tui.errors import CliError

IDLE_S = 600.0  # a forgotten --serve stops answering after 10 minutes
MARK = {"ok": "ok  ", "warn": "warn", "fail": "FAIL", "skip": "skip"}
EXAMPLES = N_("""  mgtutor doctor --serve --port 29400     on node 0: answer probes, print the addresses to use
  mgtutor doctor --serve --bind 10.0.0.1 --idle 120   only on the nodes' network, for 2 idle minutes
  mgtutor doctor --peer 10.0.0.1:29400    on every other node: which check fails between them""")


def add_peer_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group(_("between nodes (multi-node)"))
    group.add_argument("--peer", metavar="HOST:PORT", default=None,
                       help=_("check name, route, the store port, MTU, clock skew and *_SOCKET_IFNAME towards HOST"))
    group.add_argument("--serve", action="store_true",
                       help=_("on the rendezvous host: answer --peer probes on --port, until Ctrl+C or --idle. "
                              "A probe learns this host's name, clock, the address it came from, the receiving "
                              "interface and its MTU; only a client that sends mgtutor's probe line gets an answer. "
                              "It listens on every interface (the other nodes must reach it): --bind limits that"))
    group.add_argument("--bind", metavar="ADDR", default="0.0.0.0",
                       help=_("--serve: the local address to listen on (default 0.0.0.0, every IPv4 interface; "
                              "e.g. the address on the nodes' network, or :: for IPv6)"))
    group.add_argument("--idle", type=float, default=IDLE_S, metavar="S",
                       help=_("--serve: stop after S seconds without a probe (default {seconds:g}; a bare "
                              "connect does not count)").format(seconds=IDLE_S))
    add_listen_port(group, default=peer.DEFAULT_PORT,
                    help=N_("--serve: the port this peer probe listens on (default {port}; use the job's rendezvous "
                            "port while the job is not running)"))
    group.add_argument("--count", type=int, default=None, metavar="N", help=_("--serve: stop after N probes"))


def format_peer(report: peer.PeerReport) -> str:
    lines = [_("from this node to the rendezvous endpoint {endpoint}:").format(endpoint=report.endpoint)]
    for check in report.checks:
        lines.append(f"  {MARK[check.status]}  {check.name:<19} {check.detail}")
        if check.fix and check.status in ("warn", "fail"):
            lines.append("        " + _("fix: {fix}").format(fix=check.fix))
    first = report.first_failure()
    verdict = f"FAIL — {first.name}: {first.detail}" if first else _("nothing blocks the rendezvous")
    lines.append(_("verdict: {verdict}").format(verdict=verdict))
    return "\n".join(lines)


def run_peer(args: argparse.Namespace) -> int:
    if args.serve:
        raise CliError(_("--peer and --serve run on different nodes: give one of them"))
    try:
        report = peer.check_peer(args.peer, timeout=5.0)
    except ValueError as exc:
        raise CliError(f"--peer: {exc}") from None
    print(json.dumps(report.to_dict(), indent=2) if args.json else format_peer(report))
    return 0 if report.ok else 1


def _addresses_note(port: int) -> list[str]:
    lines = [_("other nodes can use, depending on the network they share:")]
    for iface, addr in peer.local_addresses():
        if not addr.startswith("127."):
            lines.append(f"  {iface:<10} {addr:<15}  mgtutor doctor --peer {addr}:{port}")
    host = socket.gethostname()
    try:
        resolved = peer.resolve(host)[0]
    except (OSError, IndexError):
        resolved = None
    if resolved is None:
        lines.append(_("hostname {host} does not resolve here: give the others an address, not the name").format(
            host=host))
    elif resolved.startswith("127."):
        lines.append(_("hostname {host} -> {address} (loopback): give the others an address above, not the name, "
                       "and set GLOO_SOCKET_IFNAME on this node").format(host=host, address=resolved))
    else:
        where = peer.interface_of(resolved) or _("not on this machine")
        lines.append(f"hostname {host} -> {resolved} ({where})")
    return lines


def run_serve(args: argparse.Namespace) -> int:
    if not 1 <= args.port < 65536:
        raise CliError(_("--port must be from 1 to 65535 (got {port})").format(port=args.port))
    if args.count is not None and args.count < 1:
        raise CliError(_("--count must be at least 1 (got {count})").format(count=args.count))
    if not args.idle > 0 or args.idle == float("inf"):
        raise CliError(_("--idle must be a number of seconds above 0 (got {seconds:g})").format(seconds=args.idle))
    try:
        ipaddress.ip_address(args.bind)
    except ValueError:
        raise CliError(_("--bind {address!r}: give a local IP address (e.g. 10.0.0.1, 0.0.0.0 or ::)").format(
            address=args.bind)) from None

    def ready(port: int) -> None:
        if args.json:
            print(json.dumps({"serving": port, "addresses": peer.local_addresses()}), flush=True)
        else:
            print(_("answering peer probes on {address} port {port} (Ctrl+C to stop; stops by itself after "
                    "{seconds:g} s without a probe)").format(address=args.bind, port=port, seconds=args.idle), flush=True)
            print("\n".join(_addresses_note(port)), flush=True)

    def probed(answer: dict) -> None:
        if args.json:
            print(json.dumps(answer), flush=True)
        else:
            print(_("probe from {address} (arrived on {iface}, MTU {mtu})").format(
                address=answer["seen_from"], iface=answer["iface"], mtu=answer["mtu"]), flush=True)

    try:
        served = peer.serve(args.port, bind=args.bind, count=args.count, idle_timeout=args.idle, on_probe=probed,
                            on_ready=ready)
    except KeyboardInterrupt:
        return 0
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            raise CliError(_("port {port} is in use here (a running rendezvous store?): pick another with --port, "
                             "or, if the job is running, probe that port with --peer from the other nodes").format(
                port=args.port)) from None
        raise CliError(_("cannot listen on {address} port {port}: {error}").format(
            address=args.bind, port=args.port, error=exc.strerror or exc)) from None
    if args.count is None or served < args.count:
        print(_("no probe for {seconds:g} s: stopped ({count} probe(s) answered)").format(seconds=args.idle, count=served),
              file=sys.stderr)
    return 0

