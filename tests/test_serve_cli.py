"""`mgtutor serve`'s own parts, in-process: the token check in front of every aiohttp handler, the
port check before the URL is printed, and what it prints (the SSH tunnel, the Jupyter proxy path).
The server and the app in a real browser: tests/test_serve_browser.py."""
from __future__ import annotations

import socket

from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from mgtutor.tui.commands.serve import COOKIE, port_problem, startup_text, token_check

TOKEN = "a-random-token"


async def page(_request: web.Request) -> web.Response:
    return web.Response(text="the app")


async def index(_request: web.Request) -> web.Response:  # as textual-serve's page starts
    return web.Response(text='<link rel="stylesheet" href="static/xterm.css" />\n<link\n  rel="stylesheet"\n'
                             '  href="https://fonts.googleapis.com/css?family=Roboto%20Mono"\n/>', content_type="text/html")


async def test_the_page_asks_nothing_of_a_third_party():
    app = web.Application(middlewares=[token_check(TOKEN, 8123)])
    app.router.add_get("/", index)
    async with TestClient(TestServer(app)) as client:
        text = await (await client.get(f"/?token={TOKEN}")).text()
    assert "googleapis" not in text and "static/xterm.css" in text


async def test_every_request_needs_the_token_or_its_cookie():
    app = web.Application(middlewares=[token_check(TOKEN, 8123)])
    app.router.add_get("/", page)
    app.router.add_get("/static/x.js", page)
    async with TestClient(TestServer(app)) as client:
        assert (await client.get("/")).status == 403
        assert (await client.get("/?token=wrong")).status == 403
        assert (await client.get("/static/x.js")).status == 403
        first = await client.get(f"/?token={TOKEN}")
        assert first.status == 200 and await first.text() == "the app"
        cookie = first.cookies[COOKIE.format(port=8123)]
        assert cookie.value == TOKEN and cookie["httponly"] and cookie["samesite"] == "Strict"
        assert (await client.get("/static/x.js")).status == 200  # the page's own requests carry the cookie
        client.session.cookie_jar.clear()
        assert (await client.get("/static/x.js")).status == 403


def test_a_port_in_use_is_said_before_anything_is_printed():
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        assert "in use" in (port_problem("127.0.0.1", port) or "").lower()
    assert port_problem("no-such-host.invalid", 8000).startswith("--host no-such-host.invalid")


def test_what_it_prints():
    local = startup_text("127.0.0.1", 8123, "http://localhost:8123", TOKEN)
    assert f"open: http://localhost:8123/?token={TOKEN}" in local
    assert "ssh -L 8123:localhost:8123" in local and "/proxy/8123" in local
    wide = startup_text("0.0.0.0", 8123, "http://localhost:8123", TOKEN)
    assert "ssh -L" not in wide and "still needs the token" in wide
