"""`doctor --serve` and `doctor --peer` keep their deadlines against a peer that drips its bytes.

Real processes of the CLI on loopback; the hostile other side is a socket in a thread of the test
(issue 46, item 6): a client that sends a byte every 1.8 s, a server that answers one that way."""
from __future__ import annotations

import json
import socket
import subprocess
import threading
import time
from collections.abc import Iterator

import pytest

from mgtutor.training.runs.launch.launcher import free_port
from mgtutor.training.runs.net.peer_probe import REQUEST
from tests.conftest import mgtutor_argv, no_gpu_env

DRIP_S = 1.8


class Dripper:
    """A client that connects again and again and sends the probe line a byte every DRIP_S seconds."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.stop = threading.Event()
        self.bytes_sent = 0
        self.last_sent_at = 0.0  # time.monotonic() of its latest byte
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self) -> None:
        while not self.stop.is_set():
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=5) as sock:
                    for byte in REQUEST:
                        sock.sendall(bytes([byte]))
                        self.bytes_sent += 1
                        self.last_sent_at = time.monotonic()
                        if self.stop.wait(DRIP_S):
                            return
            except OSError:  # the server dropped it (or is gone): connect again
                if self.stop.wait(0.2):
                    return


@pytest.fixture
def server() -> Iterator[tuple[subprocess.Popen[str], int]]:
    port = free_port()
    proc = subprocess.Popen(mgtutor_argv("doctor", "--serve", "--bind", "127.0.0.1", "--port", str(port),
                                         "--idle", "5", "--json"),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=no_gpu_env(),
                            start_new_session=True)
    try:
        assert proc.stdout is not None
        assert json.loads(proc.stdout.readline())["serving"] == port
        yield proc, port
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate(timeout=30)


@pytest.mark.integration
def test_a_dripping_client_neither_delays_a_real_probe_nor_keeps_serve_alive(
        server: tuple[subprocess.Popen[str], int]) -> None:
    proc, port = server
    dripper = Dripper(port)
    try:
        probe = subprocess.run(mgtutor_argv("doctor", "--peer", f"127.0.0.1:{port}", "--json"), capture_output=True,
                               text=True, env=no_gpu_env(), timeout=60)
        probed_at = time.monotonic()
        report = json.loads(probe.stdout)
        assert report["served"] is not None, probe.stdout
        assert {c["name"]: c["status"] for c in report["checks"]}["clock"] == "ok"
        out, err = proc.communicate(timeout=60)  # --idle 5 after the one real probe, dripping or not
        # it was still dripping all along: a byte after the real probe, while serve idled out
        assert dripper.thread.is_alive() and dripper.last_sent_at > probed_at, (dripper.bytes_sent, probed_at)
    finally:
        dripper.stop.set()
        dripper.thread.join(10)
    assert proc.returncode == 0 and "Traceback" not in err
    probes = [json.loads(line) for line in out.splitlines()]
    assert [p["seen_from"] for p in probes] == ["127.0.0.1"]  # the dripper was never answered


def _hostile_server(reply: bytes, drip: float) -> tuple[int, threading.Event, threading.Thread]:
    """A server that answers every connection with `reply`, a byte every `drip` seconds (0: at once)."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    done = threading.Event()

    def answer() -> None:
        with listener:
            listener.settimeout(60)
            conn, _addr = listener.accept()
            with conn:
                try:
                    for start in range(0, len(reply), 1 if drip else len(reply)):
                        conn.sendall(reply[start:start + (1 if drip else len(reply))])
                        if drip and done.wait(drip):
                            return
                except OSError:
                    return
                done.wait(60)

    thread = threading.Thread(target=answer, daemon=True)
    thread.start()
    return listener.getsockname()[1], done, thread


VALID = json.dumps({"tag": "mgtutor-peer", "time": 1.0e9, "host": "node0", "seen_from": "127.0.0.1"}).encode() + b"\n"
HOSTILE = {
    "a 400-digit time": (b'{"tag": "mgtutor-peer", "time": ' + b"9" * 400 + b"}\n", 0.0,
                         "the reply's time is out of range"),
    "a 400-digit mtu": (b'{"tag": "mgtutor-peer", "time": 1.0, "mtu": ' + b"7" * 400 + b"}\n", 0.0,
                        "the reply's mtu is out of range"),
    "a reply dripped a byte every 1.8 s": (VALID, DRIP_S, "no whole reply to the probe within"),
}


@pytest.mark.integration
@pytest.mark.parametrize("name", list(HOSTILE))
def test_peer_against_a_hostile_server_ends_with_one_clear_line(name: str) -> None:
    reply, drip, said = HOSTILE[name]
    port, done, thread = _hostile_server(reply, drip)
    try:
        probe = subprocess.run(mgtutor_argv("doctor", "--peer", f"127.0.0.1:{port}"), capture_output=True,
                               text=True, env=no_gpu_env(), timeout=60)
        still_dripping = thread.is_alive()
    finally:
        done.set()
        thread.join(10)
    assert "Traceback" not in probe.stderr and probe.returncode in (0, 1), probe.stderr
    clock = [line for line in probe.stdout.splitlines() if line.strip().startswith("skip  clock")]
    assert len(clock) == 1 and said in clock[0], probe.stdout
    if drip:
        assert still_dripping  # the probe gave up at its deadline, before the reply was done
