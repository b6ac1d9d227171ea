"""The between-nodes checks over real sockets on this machine (the two-host version is in
test_multinode_netns.py): endpoint parsing, interface lists, serve + probe, refused port,
unresolvable name, clock skew, the CLI."""
from __future__ import annotations

import json
import re
import socket
import subprocess
import threading
import time

import pytest

from conftest import mgtutor_argv
from mgtutor.training.runs.net import peer
from mgtutor.training.runs.net.ports import free_port


@pytest.mark.parametrize("text, expected", [
    ("10.0.0.1:29400", ("10.0.0.1", 29400)),
    ("node-0", ("node-0", peer.DEFAULT_PORT)),
    ("[fe80::1]:1234", ("fe80::1", 1234)),
    ("fe80::1", ("fe80::1", peer.DEFAULT_PORT)),
])
def test_endpoints_parse(text: str, expected: tuple[str, int]) -> None:
    assert peer.parse_endpoint(text) == expected


@pytest.mark.parametrize("text", ["", ":29400", "host:0", "host:70000", "host:http"])
def test_bad_endpoints_say_what_is_wrong(text: str) -> None:
    with pytest.raises(ValueError, match="HOST:PORT|port"):
        peer.parse_endpoint(text)


@pytest.mark.parametrize("spec, iface, hit", [
    ("eth", "eth0", True), ("eth0,ib0", "ib0", True), ("=eth", "eth0", False), ("=eth0", "eth0", True),
    ("^docker,lo", "eth0", True), ("^docker,lo", "lo", False), ("ib", "eth0", False),
])
def test_socket_ifname_lists_follow_nccl_syntax(spec: str, iface: str, hit: bool) -> None:
    assert peer.ifname_matches(spec, iface) is hit


def serve_once(port: int) -> threading.Thread:
    ready = threading.Event()
    thread = threading.Thread(target=peer.serve, kwargs=dict(port=port, bind="127.0.0.1", count=1, idle_timeout=30,
                                                           on_ready=lambda _p: ready.set()), daemon=True)
    thread.start()
    assert ready.wait(10)
    return thread


def by_name(report: peer.PeerReport) -> dict[str, peer.PeerCheck]:
    return {c.name: c for c in report.checks}


def test_probe_of_a_serving_host_measures_clock_and_mtu() -> None:
    port = free_port()
    thread = serve_once(port)
    report = peer.check_peer(f"127.0.0.1:{port}", env={})
    thread.join(10)
    checks = by_name(report)
    assert report.ok and checks["tcp"].status == "ok"
    assert report.served and report.served["seen_from"] == "127.0.0.1" and report.served["iface"] == report.route.iface
    assert checks["clock"].status == "ok" and "peer clock" in checks["clock"].detail
    assert checks["mtu"].status == "ok" and "same on the peer" in checks["mtu"].detail


def test_nothing_listening_is_a_refused_port_with_the_fix() -> None:
    port = free_port()
    report = peer.check_peer(f"127.0.0.1:{port}", env={})
    failed = report.first_failure()
    assert failed is not None and failed.name == "tcp" and "refused" in failed.detail
    assert f"--serve --port {port}" in failed.fix


def test_a_name_that_does_not_resolve_stops_at_the_first_check() -> None:
    report = peer.check_peer("no-such-node.invalid:29400", env={})
    assert [c.name for c in report.checks] == ["resolve"] and report.checks[0].status == "fail"


def test_a_socket_ifname_that_misses_the_route_fails() -> None:
    port = free_port()
    report = peer.check_peer(f"127.0.0.1:{port}", env={"GLOO_SOCKET_IFNAME": "nosuchif0", "NCCL_SOCKET_IFNAME": "^nosuch"})
    checks = by_name(report)
    assert checks["GLOO_SOCKET_IFNAME"].status == "fail"
    assert checks["GLOO_SOCKET_IFNAME"].fix == f"export GLOO_SOCKET_IFNAME={report.route.iface}"
    assert checks["NCCL_SOCKET_IFNAME"].status == "ok"


def test_a_peer_with_a_skewed_clock_fails_the_clock_check() -> None:
    """A hand-written server that answers like `--serve` on a machine whose clock is 30 s ahead."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        port = listener.getsockname()[1]

        def answer() -> None:
            conn, _ = listener.accept()
            with conn:
                conn.sendall((json.dumps({"tag": peer.PROBE_TAG, "time": time.time() + 30, "mtu": None}) + "\n").encode())

        thread = threading.Thread(target=answer, daemon=True)
        thread.start()
        report = peer.check_peer(f"127.0.0.1:{port}", env={})
        thread.join(10)
    clock = by_name(report)["clock"]
    found = re.search(r"peer clock ([+-][\d.]+) s from this one \(±([\d.]+) s\)", clock.detail)
    offset, error = float(found.group(1)), float(found.group(2))
    # The peer's time is read somewhere within the round trip, the offset against its midpoint: 30 s ± half of it.
    assert clock.status == "fail" and abs(offset - 30) <= error + 0.002 and "chrony" in clock.fix


@pytest.mark.integration
def test_cli_serve_and_peer_talk_to_each_other() -> None:
    port = free_port()
    server = subprocess.Popen(mgtutor_argv("doctor", "--serve", "--port", str(port), "--count", "1", "--json"),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert json.loads(server.stdout.readline())["serving"] == port
        probe = subprocess.run(mgtutor_argv("doctor", "--peer", f"127.0.0.1:{port}", "--json"),
                               capture_output=True, text=True, timeout=60)
        assert probe.returncode == 0, probe.stderr
        report = json.loads(probe.stdout)
        assert report["ok"] and report["served"]["tag"] == peer.PROBE_TAG
        served = json.loads(server.stdout.readline())
        assert served["seen_from"] == "127.0.0.1"
        assert server.wait(30) == 0
    finally:
        if server.poll() is None:
            server.kill()
        server.communicate()


@pytest.mark.integration
def test_cli_serve_on_a_busy_port_says_so() -> None:
    with socket.socket() as busy:
        busy.bind(("0.0.0.0", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        done = subprocess.run(mgtutor_argv("doctor", "--serve", "--port", str(port)), capture_output=True, text=True,
                              timeout=60)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert f"port {port} is in use here" in done.stderr


@pytest.mark.integration
def test_cli_peer_refused_exits_1_with_the_failing_check() -> None:
    port = free_port()
    done = subprocess.run(mgtutor_argv("doctor", "--peer", f"127.0.0.1:{port}"), capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    assert "verdict: FAIL — tcp:" in done.stdout and "refused" in done.stdout
