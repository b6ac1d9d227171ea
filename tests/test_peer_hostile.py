"""`doctor --serve` answers only real probes and stops when idle; `doctor --peer` survives any reply.

Real sockets on loopback, with threads playing the other node (no process is started)."""
from __future__ import annotations

import json
import socket
import threading

import pytest

from mgtutor.training.runs.net import peer
from mgtutor.training.runs.net.peer_probe import ANSWER_TYPES, PROBE_TAG, REQUEST
from mgtutor.tui.cli import main as cli_main


def _listener() -> socket.socket:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(4)
    return listener


def _server(reply: bytes) -> tuple[int, threading.Thread]:
    """A hand-written server on loopback that answers one connection with `reply`."""
    listener = _listener()
    port = listener.getsockname()[1]

    def answer() -> None:
        with listener:
            conn, _ = listener.accept()
            with conn:
                conn.sendall(reply)

    thread = threading.Thread(target=answer, daemon=True)
    thread.start()
    return port, thread


HOSTILE = {
    "no time": json.dumps({"tag": PROBE_TAG, "mtu": 1500}).encode() + b"\n",
    "time a string": json.dumps({"tag": PROBE_TAG, "time": "noon"}).encode() + b"\n",
    "time a list": json.dumps({"tag": PROBE_TAG, "time": []}).encode() + b"\n",
    "time NaN": b'{"tag": "mgtutor-peer", "time": NaN}\n',
    "time a bool": json.dumps({"tag": PROBE_TAG, "time": True}).encode() + b"\n",
    "mtu a string": json.dumps({"tag": PROBE_TAG, "time": 1.0, "mtu": "big"}).encode() + b"\n",
    "4000 [": b"[" * 4000 + b"\n",
    "a list": b"[1, 2]\n",
    "not utf-8": b"\xff\xfe\x00{\n",
    "no newline, 4 KiB": b"x" * 4096,
    "time 400 digits": b'{"tag": "mgtutor-peer", "time": ' + b"9" * 400 + b"}\n",
    "mtu 400 digits": b'{"tag": "mgtutor-peer", "time": 1.0, "mtu": ' + b"9" * 400 + b"}\n",
    "time 1e308": b'{"tag": "mgtutor-peer", "time": 1e308}\n',
    "time below zero": b'{"tag": "mgtutor-peer", "time": -5}\n',
    "nothing": b"",
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_a_malformed_reply_is_one_line_of_the_report(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    port, thread = _server(HOSTILE[name])
    report = peer.check_peer(f"127.0.0.1:{port}", env={})
    thread.join(10)
    checks = {c.name: c for c in report.checks}
    assert checks["tcp"].status == "ok"
    assert checks["clock"].status == "skip" and "\n" not in checks["clock"].detail
    assert report.served is None
    json.dumps(report.to_dict())  # what --json prints


@pytest.mark.parametrize("name", ["time 400 digits", "mtu 400 digits", "time 1e308"])
def test_a_number_out_of_range_is_named_as_such(name: str) -> None:
    port, thread = _server(HOSTILE[name])
    report = peer.check_peer(f"127.0.0.1:{port}", env={})
    thread.join(10)
    clock = next(c for c in report.checks if c.name == "clock")
    assert clock.detail.startswith(f"the reply's {name.split()[0]} is out of range")


def test_only_the_fields_of_the_probe_are_kept_from_a_reply() -> None:
    reply = {"tag": PROBE_TAG, "time": 1.0, "host": "b", "extra": [[1] * 50], "_received": 3}
    port, thread = _server(json.dumps(reply).encode() + b"\n")
    report = peer.check_peer(f"127.0.0.1:{port}", env={})
    thread.join(10)
    assert report.served is not None and set(report.served) <= {"tag", *ANSWER_TYPES}
    assert report.served["host"] == "b"


def test_the_peer_command_prints_a_malformed_reply_without_a_traceback(capsys: pytest.CaptureFixture[str]) -> None:
    port, thread = _server(b"[" * 4000 + b"\n")
    code = cli_main(["doctor", "--peer", f"127.0.0.1:{port}"])
    thread.join(10)
    out = capsys.readouterr().out
    assert code == 0 and "the reply is not JSON" in out and "Traceback" not in out


def _serve_in_thread(**kwargs: object) -> tuple[int, threading.Thread, dict[str, object]]:
    found: dict[str, object] = {"probes": []}
    ready = threading.Event()

    def on_ready(port: int) -> None:
        found["port"] = port
        ready.set()

    def run() -> None:
        found["served"] = peer.serve(0, bind="127.0.0.1", on_ready=on_ready,
                                     on_probe=found["probes"].append, **kwargs)  # type: ignore[arg-type,attr-defined]

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    assert ready.wait(10)
    return int(found["port"]), thread, found  # type: ignore[arg-type]


def test_a_bare_connect_or_another_protocol_learns_nothing_and_is_no_probe() -> None:
    port, thread, found = _serve_in_thread(count=1, idle_timeout=60)
    with socket.create_connection(("127.0.0.1", port)) as bare:
        bare.shutdown(socket.SHUT_WR)  # says nothing
        assert bare.recv(4096) == b""  # and is told nothing: no hostname, no clock
    with socket.create_connection(("127.0.0.1", port)) as http:
        http.sendall(b"GET / HTTP/1.0\r\n\r\n")
        assert http.recv(4096) == b""
    report = peer.check_peer(f"127.0.0.1:{port}", env={})  # the one real probe
    thread.join(10)
    assert not thread.is_alive() and found["served"] == 1
    assert [p["seen_from"] for p in found["probes"]] == ["127.0.0.1"]  # type: ignore[attr-defined]
    assert report.served is not None and report.served["tag"] == PROBE_TAG


def test_serve_stops_when_idle_and_bare_connects_do_not_keep_it_alive() -> None:
    port, thread, found = _serve_in_thread(idle_timeout=1.0)
    for _ in range(3):
        with socket.create_connection(("127.0.0.1", port)):
            pass
    thread.join(30)
    assert not thread.is_alive() and found["served"] == 0


def test_the_request_line_is_what_a_real_client_sends() -> None:
    request = json.loads(REQUEST)
    assert request["tag"] == PROBE_TAG and REQUEST.endswith(b"\n")


@pytest.mark.parametrize("argv, said", [
    (["--bind", "every-interface"], "--bind 'every-interface': give a local IP address"),
    (["--idle", "0"], "--idle must be a number of seconds above 0"),
    (["--idle", "nan"], "--idle must be a number of seconds above 0"),
])
def test_serve_refuses_bad_bind_and_idle(argv: list[str], said: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main(["doctor", "--serve", *argv]) == 2
    assert said in capsys.readouterr().err


def test_serve_help_says_what_it_answers_and_how_to_limit_it(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        cli_main(["doctor", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "hostname" in text or "name, clock" in text
    assert "--bind ADDR" in text and "--idle S" in text and "default 600" in text
