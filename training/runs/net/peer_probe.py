"""The probe between two nodes on the wire: `doctor --peer` asks, `doctor --serve` answers.

    client: connects, sends  {"tag": "mgtutor-peer", "probe": 1}\\n
    server: answers          {"tag": "mgtutor-peer", "time": …, "host": …, "seen_from": …, "iface": …, "mtu": …}\\n

The server answers (and counts) only a client that sends the request line, whole, within a couple
of seconds: a port scanner's bare connect, a stray client speaking another protocol, or one that
drips a byte at a time learns nothing and does not keep an idle server alive; each client has a
thread, so none delays another. Whatever comes back to the client is read by a deadline and checked
field by field: a malformed reply (wrong types, 4000 nested brackets, a 400-digit number, no
newline, a byte at a time) is one line of the report, never an exception or a long wait.
"""
from __future__ import annotations

import json
import math
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

PROBE_TAG = "mgtutor-peer"
REQUEST = (json.dumps({"tag": PROBE_TAG, "probe": 1}) + "\n").encode()
REQUEST_WAIT_S = 2.0  # a real client sends its line at once
MAX_LINE = 4096
MAX_TIME = 1e11  # seconds since 1970: year 5138; a clock further off is no clock
MAX_MTU = 1 << 20
REPLY_WAIT_S = 1.5  # for the whole reply: a server that answers at all answers at once
MAX_CLIENTS = 32  # connections answered at once; more are closed unanswered
ACCEPT_POLL_S = 0.25  # how often the accepting loop looks at the count and the idle clock
ANSWER_TYPES: dict[str, tuple[type, ...]] = {"time": (int, float), "host": (str,), "seen_from": (str,),
                                             "local": (str,), "iface": (str, type(None)), "mtu": (int, type(None))}


def read_line(sock: socket.socket, deadline: float, limit: int = MAX_LINE) -> bytes:
    """Bytes up to the first newline (or `limit`, or end of stream), all of it by `deadline`
    (time.monotonic()): a peer that drips a byte at a time gets socket.timeout there, not a fresh
    wait for every byte."""
    data = b""
    while b"\n" not in data and len(data) < limit:
        left = deadline - time.monotonic()
        if left <= 0:
            raise socket.timeout("the line did not come whole in time")
        sock.settimeout(left)
        chunk = sock.recv(limit - len(data))
        if not chunk:
            break
        data += chunk
    return data.split(b"\n", 1)[0]


def _field_problem(key: str, value: Any) -> str | None:
    """Why one field of a reply is unusable, or None. Numbers are bounded: a 400-digit time would
    overflow a float, 1e308 would print as 300 digits of skew."""
    if not isinstance(value, ANSWER_TYPES[key]) or isinstance(value, bool):
        return f"the reply's {key} is malformed ({type(value).__name__})"
    number: Any = value
    if key == "time" and isinstance(number, float) and not math.isfinite(number):
        return "the reply's time is not a number"
    if key == "time" and not 0 <= number < MAX_TIME:
        return "the reply's time is out of range"
    if key == "mtu" and number is not None and not 0 < number <= MAX_MTU:
        return "the reply's mtu is out of range"
    return None


def parse_answer(data: bytes) -> tuple[dict[str, Any] | None, str]:
    """(the server's answer, only the fields we know, "") or (None, why it is no answer of ours), in
    one short line."""
    if not data:
        return None, "the port closed without a reply"
    try:
        answer = json.loads(data.decode("utf-8"))
    except (ValueError, RecursionError):
        return None, f"the reply is not JSON ({len(data)} bytes)"
    if not isinstance(answer, dict) or answer.get("tag") != PROBE_TAG:
        return None, "the reply is not from `mgtutor doctor --serve`"
    if answer.get("time") is None:
        return None, "the reply has no time"
    for key in ANSWER_TYPES:
        problem = None if answer.get(key) is None else _field_problem(key, answer[key])
        if problem:
            return None, problem
    return {key: answer.get(key) for key in ("tag", *ANSWER_TYPES)}, ""


def tcp_probe(host: str, port: int, timeout: float = 3.0) -> tuple[str, str, dict[str, Any] | None, float, str]:
    """(status, detail, served answer or None, t_before_connect, why the answer is None);
    status open|refused|timeout|unreachable."""
    t0 = time.time()
    try:
        sock = socket.create_connection((host, port), timeout=timeout)
    except socket.timeout:
        return "timeout", f"no answer from {host}:{port} within {timeout:g} s (packets dropped on the way)", None, t0, ""
    except ConnectionRefusedError:
        return "refused", f"{host}:{port} refused the connection (nothing listens on port {port})", None, t0, ""
    except OSError as exc:
        return "unreachable", f"{host}:{port}: {exc.strerror or exc}", None, t0, ""
    wait = min(timeout, REPLY_WAIT_S)
    with sock:
        try:
            sock.settimeout(wait)
            sock.sendall(REQUEST)
            answer, why = parse_answer(read_line(sock, time.monotonic() + wait))
        except socket.timeout:
            answer, why = None, f"no whole reply to the probe within {wait:g} s"
        except OSError:
            answer, why = None, "no reply to the probe"
    if answer is not None:
        answer["_received"] = time.time()
    return "open", f"{host}:{port} accepts connections", answer, t0, why


def probe_answer(conn: socket.socket, peer_addr: str, interface_of: Callable[[str], str | None],
                 interface_mtu: Callable[[str | None], int | None]) -> dict[str, Any]:
    local = conn.getsockname()[0]
    iface = interface_of(local)
    return {"tag": PROBE_TAG, "time": time.time(), "host": socket.gethostname(), "seen_from": peer_addr,
            "local": local, "iface": iface, "mtu": interface_mtu(iface)}


def is_request(conn: socket.socket) -> bool:
    """Whether the client sent our request line, whole, within REQUEST_WAIT_S (anything else is
    dropped unanswered)."""
    try:
        data = read_line(conn, time.monotonic() + REQUEST_WAIT_S, 256)
        request = json.loads(data.decode("utf-8"))
    except (OSError, ValueError, RecursionError):
        return False
    return isinstance(request, dict) and request.get("tag") == PROBE_TAG


class _Probes:
    """What the connections' threads share: the probes answered, when the last one came, and the
    callback, called one probe at a time."""

    def __init__(self, count: int | None, on_probe: Callable[[dict[str, Any]], None] | None) -> None:
        self.lock = threading.Lock()
        self.count, self.on_probe = count, on_probe
        self.served = 0
        self.last = time.monotonic()

    def done(self) -> bool:
        with self.lock:
            return self.count is not None and self.served >= self.count

    def answered(self, reply: dict[str, Any]) -> None:
        with self.lock:
            self.served += 1
            self.last = time.monotonic()
            if self.on_probe:
                try:
                    self.on_probe(reply)
                except (OSError, ValueError):  # whoever read the output has gone: go on answering quietly
                    self.on_probe = None


def _answer_one(conn: socket.socket, peer_addr: str, answer: Callable[[socket.socket, str], dict[str, Any]],
                probes: _Probes) -> None:
    with conn:
        try:
            if not is_request(conn) or probes.done():
                return
            reply = answer(conn, peer_addr)
            conn.settimeout(REQUEST_WAIT_S)
            conn.sendall((json.dumps(reply) + "\n").encode())
        except OSError:
            return
    probes.answered(reply)


def serve_probes(listener: socket.socket, answer: Callable[[socket.socket, str], dict[str, Any]],
                 count: int | None = None, idle_timeout: float | None = None,
                 on_probe: Callable[[dict[str, Any]], None] | None = None) -> int:
    """Answer probes on a listening socket until `count` probes, or `idle_timeout` s without a real
    probe (a bare connect, or a client that drips its line, does not count); returns probes served.
    Each connection has a thread and REQUEST_WAIT_S for its whole request, so a slow client neither
    delays a real probe nor keeps the server alive."""
    probes = _Probes(count, on_probe)
    handlers: list[threading.Thread] = []
    while not probes.done():
        wait = ACCEPT_POLL_S
        if idle_timeout is not None:
            wait = min(wait, probes.last + idle_timeout - time.monotonic())
            if wait <= 0:
                break
        listener.settimeout(wait)
        try:
            conn, (peer_addr, *_rest) = listener.accept()
        except socket.timeout:
            continue
        handlers = [thread for thread in handlers if thread.is_alive()]
        if len(handlers) >= MAX_CLIENTS:
            conn.close()
            continue
        handlers.append(threading.Thread(target=_answer_one, args=(conn, peer_addr, answer, probes), daemon=True))
        handlers[-1].start()
    for thread in handlers:
        thread.join(2 * REQUEST_WAIT_S)
    return probes.served
