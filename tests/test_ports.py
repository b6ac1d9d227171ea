"""The port a run's store listens on stays out of the kernel's ephemeral range, where any outgoing connection on
the machine could take it before rank 0 binds it (CI saw a retried run die at init with EADDRINUSE)."""
from __future__ import annotations

import socket
from pathlib import Path

import pytest

from mgtutor.training.runs.net import ports


@pytest.fixture
def linux_default_range(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "ip_local_port_range"
    path.write_text("32768\t60999\n")
    monkeypatch.setattr(ports, "EPHEMERAL_RANGE", path)
    return path


def test_the_port_is_below_the_ephemeral_range_and_free(linux_default_range: Path) -> None:
    for _ in range(20):
        port = ports.free_port()
        assert 32768 - ports.BELOW_EPHEMERAL <= port < 32768
        assert ports.bindable("127.0.0.1", port)


def test_a_port_someone_holds_is_passed_over(linux_default_range: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as holder, socket.socket() as other:
        holder.bind(("127.0.0.1", 0))
        other.bind(("127.0.0.1", 0))
        held, free = holder.getsockname()[1], other.getsockname()[1]
        other.close()
        monkeypatch.setattr(ports.random, "sample", lambda population, k: [held, free])
        assert ports.free_port() == free


@pytest.mark.parametrize("range_text", ["1024 65535", "not numbers", None], ids=["no room below", "unreadable", "missing"])
def test_without_room_below_the_range_it_takes_what_the_kernel_gives(range_text: str | None, tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "ip_local_port_range"
    if range_text is not None:
        path.write_text(range_text)
    monkeypatch.setattr(ports, "EPHEMERAL_RANGE", path)
    monkeypatch.setattr(ports.random, "sample", lambda population, k: pytest.fail("tried below a range it cannot use"))
    assert ports.bindable("127.0.0.1", ports.free_port())
