"""`mgtutor serve`'s own parts, in-process: the token check in front of every aiohttp handler, the
port check before the URL is printed, and what it prints (the SSH tunnel, the Jupyter proxy path).
The server and the app in a real browser: tests/test_serve_browser.py."""
from __future__ import annotations

import asyncio
import logging
import socket

from aiohttp import WSServerHandshakeError, web
from aiohttp.test_utils import TestClient, TestServer

from mgtutor.tui.cli import main as cli_main
from mgtutor.tui.commands.serve import (COOKIE, access_logger, allowed_origins, make_server, origin_check, port_problem,
                                        startup_text, token_check)
from mgtutor.training.runs.net.ports import free_port

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


# issue 46, item 3: the websocket from another origin, the token in the access log, a cookie of bad bytes,
# a host name too long to resolve.
async def socket_page(request: web.Request) -> web.WebSocketResponse:
    ws = web.WebSocketResponse()
    await ws.prepare(request)
    await ws.send_str("the terminal")
    await ws.close()
    return ws


async def handshake(client: TestClient, origin: str | None, host: str | None = None) -> int:
    headers = {k: v for k, v in (("Origin", origin), ("Host", host)) if v is not None}
    try:
        ws = await client.ws_connect(f"/ws?token={TOKEN}", headers=headers)
    except WSServerHandshakeError as exc:
        return exc.status
    await ws.close()
    return 101


async def test_the_websocket_comes_only_from_the_served_origin():
    port = free_port()
    app = web.Application(middlewares=[token_check(TOKEN, port),
                                       origin_check("127.0.0.1", port, "https://jupyter.example/user/me/proxy/8000")])
    app.router.add_get("/ws", socket_page)
    async with TestClient(TestServer(app, host="127.0.0.1", port=port)) as client:
        assert await handshake(client, f"http://localhost:{port}") == 101
        assert await handshake(client, f"http://127.0.0.1:{port}") == 101
        assert await handshake(client, "https://jupyter.example", "jupyter.example") == 101  # through the proxy
        assert await handshake(client, "http://localhost:9999") == 403  # another port of this host
        assert await handshake(client, "http://evil.example") == 403
        assert await handshake(client, None) == 403
        assert await handshake(client, f"http://evil.example:{port}", f"evil.example:{port}") == 403  # rebound DNS
        assert await handshake(client, f"http://localhost:{port}", f"evil.example:{port}") == 403


def test_a_wildcard_host_takes_this_machines_names_and_addresses():
    origins, hosts = allowed_origins("0.0.0.0", 8123, None)
    assert "http://localhost:8123" in origins and f"{socket.gethostname().lower()}:8123" in hosts
    assert "http://0.0.0.0:8123" not in origins


async def test_a_cookie_that_is_not_utf8_gets_403_not_500():
    port = free_port()
    app = web.Application(middlewares=[token_check(TOKEN, port)])
    app.router.add_get("/", page)
    async with TestClient(TestServer(app, host="127.0.0.1", port=port)):
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nCookie: " + COOKIE.format(port=port).encode()
                     + b"=\xff\xfe\xc3(\r\nConnection: close\r\n\r\n")
        await writer.drain()
        status = (await reader.readline()).decode()
        writer.close()
    assert status.split()[1] == "403", status


async def test_the_access_log_never_holds_the_token(caplog):
    app = web.Application(middlewares=[token_check(TOKEN, 8123)])
    app.router.add_get("/", page)
    with caplog.at_level(logging.INFO, logger="aiohttp.access"):
        server = TestServer(app)
        await server.start_server(access_log_class=access_logger())  # as serve() runs it
        async with TestClient(server) as client:
            assert (await client.get(f"/?token={TOKEN}")).status == 200
            assert (await client.get("/?token=wrong-one", headers={"Referer": f"http://x/?token={TOKEN}"})).status == 403
    logged = "\n".join(r.getMessage() for r in caplog.records if r.name == "aiohttp.access")
    assert '"GET /"' in logged and TOKEN not in logged and "wrong-one" not in logged


def test_the_server_runs_with_that_access_log(monkeypatch):
    seen = {}

    def run_app(app, **kwargs):
        app.close()  # the coroutine that would build the app
        seen.update(kwargs)

    monkeypatch.setattr(web, "run_app", run_app)
    server = make_server("127.0.0.1", 8123, TOKEN)
    monkeypatch.setattr(server, "initialize_logging", lambda: None)
    server.serve()
    assert seen["access_log_class"].__name__ == "PathOnlyAccessLogger"


def test_a_70_character_host_name_is_one_line(capsys):
    assert cli_main(["serve", "--host", "a" * 70]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "Traceback" not in err and "--host aaaa" in err
