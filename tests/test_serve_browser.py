"""`mgtutor serve` in a real browser: without the token every request is refused (the page, its
scripts, the websocket); with the printed URL the app's Home renders and `l` opens Lessons; SIGTERM
ends the server and the tab's app. It listens on 127.0.0.1 unless --host says otherwise. The app draws on a canvas, so what it rendered
is read from the websocket frames the browser received (the terminal output)."""
from __future__ import annotations

import os
import re
import signal
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager

import psutil
import pytest

from tests.browser import chromium
from tests.conftest import mgtutor_argv, no_gpu_env
from mgtutor.training.runs.net.ports import free_port

pytestmark = pytest.mark.integration
ESCAPES = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b.")


@contextmanager
def serving(*extra: str) -> Iterator[tuple[str, int, subprocess.Popen[str]]]:
    """`mgtutor serve` on a free port in its own session; yields (printed URL, port, process); always reaped."""
    port = free_port()
    proc = subprocess.Popen(mgtutor_argv("serve", "--port", str(port), *extra), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, env=no_gpu_env(), start_new_session=True,
                            stdin=subprocess.DEVNULL)
    try:
        url, seen = None, []
        assert proc.stdout is not None
        for line in proc.stdout:
            seen.append(line)
            if match := re.search(r"^open: (\S+)", line):
                url = match.group(1)
                break
        assert url, "".join(seen)
        deadline = time.monotonic() + 30
        while not listening(proc.pid, port) and time.monotonic() < deadline:
            time.sleep(0.1)
        yield url, port, proc
    finally:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=20)
        except ProcessLookupError:
            pass  # the test stopped it already
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)


def listening(pid: int, port: int) -> list[str]:
    """The addresses the server listens on for `port`."""
    try:
        conns = psutil.Process(pid).net_connections(kind="tcp")
    except psutil.Error:
        return []
    return [c.laddr.ip for c in conns if c.status == psutil.CONN_LISTEN and c.laddr.port == port]


def status_of(url: str, headers: dict[str, str] | None = None) -> int:
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers or {}), timeout=10) as reply:
            return reply.status
    except urllib.error.HTTPError as exc:
        return exc.code


def test_without_the_token_nothing_is_served_and_only_loopback_listens():
    with serving() as (url, port, proc):
        assert "token=" in url and url.startswith(f"http://localhost:{port}/")
        assert listening(proc.pid, port) == ["127.0.0.1"]
        base = f"http://127.0.0.1:{port}"
        assert status_of(base + "/") == 403
        assert status_of(base + "/?token=wrong") == 403
        assert status_of(base + "/static/js/textual.js") == 403
        upgrade = {"Connection": "Upgrade", "Upgrade": "websocket", "Sec-WebSocket-Version": "13",
                   "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ=="}
        assert status_of(base + "/ws", upgrade) == 403
        assert status_of(url.replace("localhost", "127.0.0.1")) == 200
    with serving("--host", "0.0.0.0") as (url, port, proc):
        assert listening(proc.pid, port) == ["0.0.0.0"]  # told to: every interface


def test_home_renders_and_l_opens_lessons_in_a_browser(tmp_path):
    frames: list[str] = []

    def received(payload: str | bytes) -> None:
        frames.append(payload if isinstance(payload, str) else payload.decode("utf-8", "replace"))

    def shown_since(start: int) -> str:
        return ESCAPES.sub("", "".join(frames[start:]))

    requests: list[str] = []
    statuses: list[tuple[str, int]] = []
    errors: list[str] = []
    with serving() as (url, port, proc), chromium() as browser:
        page = browser.new_page(viewport={"width": 1200, "height": 800})
        page.on("request", lambda request: requests.append(request.url))
        page.on("response", lambda response: statuses.append((response.url, response.status)))
        page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
        assert page.goto(url.split("?")[0]).status == 403
        page.on("websocket", lambda ws: ws.on("framereceived", received))
        assert page.goto(url).status == 200
        deadline = time.monotonic() + 60
        while "The way forward" not in shown_since(0) and time.monotonic() < deadline:
            page.wait_for_timeout(200)
        assert "The way forward" in shown_since(0), shown_since(0)[-2000:]  # Home
        page.screenshot(path=str(tmp_path / "home.png"))
        start = len(frames)
        page.mouse.click(600, 400)  # the terminal takes the keys once it has the focus
        page.keyboard.press("l")
        deadline = time.monotonic() + 30
        while "Check your GPUs and CUDA" not in shown_since(start) and time.monotonic() < deadline:
            page.wait_for_timeout(200)
        assert "Check your GPUs and CUDA" in shown_since(start)  # lesson 01 in the Lessons list
        page.screenshot(path=str(tmp_path / "lessons.png"))
        apps = psutil.Process(proc.pid).children(recursive=True)  # the tab's app (through a shell)
        assert any("mgtutor.tui" in " ".join(p.cmdline()) for p in apps)
        os.kill(proc.pid, signal.SIGTERM)  # the server alone, as `kill PID` does: its apps go with it
        assert proc.wait(timeout=60) == 0
        assert not [p.pid for p in apps if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
    assert (tmp_path / "lessons.png").stat().st_size > 10_000
    own = (f"http://localhost:{port}/", f"ws://localhost:{port}/")
    assert requests and all(r.startswith(own) for r in requests), requests  # no font from a third party
    # every answer is 200 but the refused first visit; the only console errors are refusals: that visit,
    # and the browser's own /favicon.ico (403 without the cookie, 404 with it: the app has none;
    # Playwright does not report that request)
    odd = [(u, code) for u, code in statuses if code != 200]
    assert odd == [(url.split("?")[0], 403)], odd
    assert all(re.search(r"Failed to load resource: .* (403|404)", e) for e in errors), errors
