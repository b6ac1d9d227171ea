"""The port a run's store listens on.

A port the kernel hands out for bind(port 0) comes from its ephemeral range, the same range it takes the local
port of every outgoing connection from. Between choosing such a port and rank 0 (or torchrun) binding it some
seconds later, any connection on the machine (another job's ranks meeting, a store's clients) may take it, and
the run dies at init with EADDRINUSE. A port below that range is never given to an outgoing connection."""
from __future__ import annotations

import random
import socket
from pathlib import Path

EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")
BELOW_EPHEMERAL = 2700  # ports tried below the ephemeral range: 30068-32767 under Linux's default range
TRIES = 20


def ephemeral_low() -> int | None:
    try:
        return int(EPHEMERAL_RANGE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def bindable(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def free_port(host: str = "127.0.0.1") -> int:
    """A port free now, below the ephemeral range where there is room (Linux); else whatever bind(0) gives."""
    low = ephemeral_low()
    if low is not None and low - BELOW_EPHEMERAL >= 10000:
        for port in random.sample(range(low - BELOW_EPHEMERAL, low), TRIES):
            if bindable(host, port):
                return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]
