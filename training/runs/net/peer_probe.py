"""The probe between two nodes on the wire: `doctor --peer` asks, `doctor --serve` answers.

    client: connects, sends  {"tag": "mgtutor-peer", "probe": 1}\\n
    server: answers          {"tag": "mgtutor-peer", "time": …, "host": …, "seen_from": …, "iface": …, "mtu": …}\\n

The server answers (and counts) only a client that sends the request line within a couple of
seconds: a port scanner's bare connect, or a stray client speaking another protocol, learns
nothing and does not keep an idle server alive. Whatever comes back to the client is checked
field by field: a malformed reply (wrong types, 4000 nested brackets, no newline) is one line of
the report, never an exception.
"""
from __future__ import annotations

import json
import math
import socket
import time
from collections.abc import Callable
from typing import Any

PROBE_TAG = "mgtutor-peer"
REQUEST = (json.dumps({"tag": PROBE_TAG, "probe": 1}) + "\n").encode()
REQUEST_WAIT_S = 2.0  # a real client sends its line at once
MAX_LINE = 4096
ANSWER_TYPES: dict[str, tuple[type, ...]] = {"time": (int, float), "host": (str,), "seen_from": (str,),
                                             "local": (str,), "iface": (str, type(None)), "mtu": (int, type(None))}


def read_line(sock: socket.socket, limit: int = MAX_LINE) -> bytes:
    """Bytes up to the first newline (or `limit`, or end of stream); socket.timeout propagates."""
    data = b""
    while b"\n" not in data and len(data) < limit:
        chunk = sock.recv(limit - len(data))
        if not chunk:
            break
        data += chunk
    return data.split(b"\n", 1)[0]


def parse_answer(data: bytes) -> tuple[dict[str, Any] | None, str]:
    """(the server's answer, "") or (None, why it is no answer of ours), in one short line."""
    if not data:
        return None, "the port closed without a reply"
    try:
        answer = json.loads(data.decode("utf-8"))
    except (ValueError, RecursionError):
        return None, f"the reply is not JSON ({len(data)} bytes)"
    if not isinstance(answer, dict) or answer.get("tag") != PROBE_TAG:
        return None, "the reply is not from `mgtutor doctor --serve`"
    for key, types in ANSWER_TYPES.items():
        value = answer.get(key)
        if key == "time" and value is None:
            return None, "the reply has no time"
        if value is not None and (not isinstance(value, types) or isinstance(value, bool)):
            return None, f"the reply's {key} is malformed ({type(value).__name__})"
    if not math.isfinite(answer["time"]):
        return None, "the reply's time is not a number"
    return answer, ""


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
    with sock:
        sock.settimeout(min(timeout, 1.5))
        try:
            sock.sendall(REQUEST)
            answer, why = parse_answer(read_line(sock))
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
    """Whether the client sent our request line in time (anything else is dropped unanswered)."""
    conn.settimeout(REQUEST_WAIT_S)
    try:
        data = read_line(conn, 256)
        request = json.loads(data.decode("utf-8"))
    except (OSError, ValueError, RecursionError):
        return False
    return isinstance(request, dict) and request.get("tag") == PROBE_TAG


def serve_probes(listener: socket.socket, answer: Callable[[socket.socket, str], dict[str, Any]],
                 count: int | None = None, idle_timeout: float | None = None,
                 on_probe: Callable[[dict[str, Any]], None] | None = None) -> int:
    """Answer probes on a listening socket until `count` probes, or `idle_timeout` s without a real
    probe (a bare connect does not count); returns probes served."""
    served = 0
    deadline = None if idle_timeout is None else time.monotonic() + idle_timeout
    while count is None or served < count:
        left = None if deadline is None else deadline - time.monotonic()
        if left is not None and left <= 0:
            break
        listener.settimeout(left)
        try:
            conn, (peer_addr, *_rest) = listener.accept()
        except socket.timeout:
            break
        with conn:
            if not is_request(conn):
                continue
            reply = answer(conn, peer_addr)
            try:
                conn.sendall((json.dumps(reply) + "\n").encode())
            except OSError:
                continue
        served += 1
        if deadline is not None:
            deadline = time.monotonic() + idle_timeout  # type: ignore[operator]
        if on_probe:
            on_probe(reply)
    return served
