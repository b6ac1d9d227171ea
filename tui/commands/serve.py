"""`mgtutor serve`: the same app in a browser (textual-serve), for a box reached by SSH or Jupyter.

textual-serve has no authentication of its own: whoever reaches the port gets a shell-capable app
(it launches runs). So every request passes a check first: the random token of the printed URL, in
the query (`/?token=…`, the first page) or in the cookie that page sets (its scripts, styles and
websocket: a browser sends the cookie to the same host only, and not from another site, SameSite).
Without it: 403, the websocket included. The websocket is also refused (403) unless its Origin is
the served origin, a loopback form of it or --public-url's, and its Host one of their hosts: a page
on another port of localhost shares the cookie (cookies are not kept apart by port), and a DNS name
rebound to 127.0.0.1 would pass a same-origin test. The access log shows paths, never a query (the
token). It listens on 127.0.0.1 unless `--host` says otherwise.
"""
from __future__ import annotations

import argparse
import asyncio
import hmac
import ipaddress
import logging
import re
import secrets
import shlex
import signal
import socket
import sys
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import urlsplit

from mgtutor.training.foundation.i18n import N_, _
from mgtutor.tui.commands.options import add_listen_port
from mgtutor.tui.errors import CliError

EPILOG = N_("""examples:
  mgtutor serve                       http://localhost:8000/?token=… on this machine only
  mgtutor serve --port 8123           another port
  mgtutor serve --host 0.0.0.0        every interface (anyone who can reach it still needs the token)

From your laptop, over SSH (the server stays on 127.0.0.1 of the GPU box):
  ssh -L 8000:localhost:8000 gpu-box     then open the printed URL on the laptop

Behind Jupyter (jupyter-server-proxy forwards https://JUPYTER/proxy/PORT/ to localhost:PORT):
  mgtutor serve --public-url https://JUPYTER/user/NAME/proxy/8000
  and open https://JUPYTER/user/NAME/proxy/8000/?token=… (the URL it prints)""")

# textual-serve's page loads its font from Google: a request to a third party from a page that
# holds a token, and a console error where there is no internet. The browser's monospace font does.
THIRD_PARTY_FONT = re.compile(r"<link[^>]*fonts\.googleapis\.com[^>]*>")
COOKIE = "mgtutor_token_{port}"  # one per port: two servers on one host keep their own


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "serve", help=_("the app in a web browser (textual-serve), behind a token"),
        description=_("Serve the mgtutor app to a web browser. Each browser tab gets its own app process. "
                      "The printed URL carries a random token; a request without it is refused."),
        epilog=_(EPILOG), formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--host", default="127.0.0.1",
                        help=_("the address to listen on (default 127.0.0.1: only this machine, or an SSH tunnel)"))
    add_listen_port(parser, default=8000, help=N_("the port the web server listens on (default {port})"))
    parser.add_argument("--public-url", metavar="URL",
                        help=_("the URL the browser reaches this server by, when a proxy stands between "
                               "(Jupyter: https://JUPYTER/user/NAME/proxy/PORT); default http://localhost:PORT"))
    parser.set_defaults(func=main)


def app_command() -> str:
    """textual-serve starts the app through a shell for each browser: the argv, quoted."""
    return shlex.join([sys.executable, "-m", "mgtutor.tui"])


def token_check(token: str, port: int) -> Callable[..., Awaitable[Any]]:
    """aiohttp middleware: the token from the query or this server's cookie, or 403."""
    from aiohttp import web

    cookie = COOKIE.format(port=port)

    @web.middleware
    async def check(request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]) -> web.StreamResponse:
        given = request.query.get("token") or request.cookies.get(cookie) or ""
        # a cookie of bytes that are not UTF-8 arrives with surrogates: a wrong token, not a 500
        if not (given.isascii() and hmac.compare_digest(given.encode("ascii"), token.encode("ascii"))):
            raise web.HTTPForbidden(text="mgtutor serve: open the URL that `mgtutor serve` printed (it carries "
                                         "the token); this request has none, or a wrong one.\n")
        response = await handler(request)
        if isinstance(response, web.Response) and response.text and "fonts.googleapis.com" in response.text:
            response.text = THIRD_PARTY_FONT.sub("", response.text)  # the page asks nothing of anyone else
        if request.query.get("token") and not response.prepared:
            response.set_cookie(cookie, token, httponly=True, samesite="Strict")
        return response

    return check


WILDCARDS = ("0.0.0.0", "::", "")
LOOPBACK = ("localhost", "127.0.0.1", "[::1]")


def _origin(url: str) -> str:
    """scheme://host[:port], lower case, the port left out where it is the scheme's own (as browsers send it)."""
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError:
        return ""
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return ""
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    default = 443 if parts.scheme == "https" else 80
    return f"{parts.scheme}://{host.lower()}" + (f":{port}" if port and port != default else "")


def _ip_literal(host_header: str) -> bool:
    name = host_header.rsplit(":", 1)[0] if not host_header.endswith("]") else host_header
    try:
        ipaddress.ip_address(name.strip("[]"))
    except ValueError:
        return False
    return True


def allowed_origins(host: str, port: int, public_url: str | None = None) -> tuple[set[str], set[str]]:
    """The origins the websocket may come from and the Host values it may name: the served origin,
    its loopback forms, and --public-url's; with a wildcard --host, this machine's names too."""
    names = set(LOOPBACK)
    if host not in WILDCARDS:
        names.add(f"[{host}]" if ":" in host and not host.startswith("[") else host)
    else:
        names.update({socket.gethostname(), socket.getfqdn()})
    origins = {f"http://{name.lower()}:{port}" for name in names if name}
    if public_url and _origin(public_url):
        origins.add(_origin(public_url))
    hosts = {origin.split("://", 1)[1] for origin in origins}
    return origins, hosts


def origin_check(host: str, port: int, public_url: str | None = None) -> Callable[..., Awaitable[Any]]:
    """aiohttp middleware: a websocket whose Origin or Host is not this server's gets 403."""
    from aiohttp import web

    origins, hosts = allowed_origins(host, port, public_url)
    wildcard = host in WILDCARDS

    @web.middleware
    async def check(request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]) -> web.StreamResponse:
        if request.headers.get("Upgrade", "").lower() == "websocket":
            given_host = request.headers.get("Host", "").strip().lower()
            origin = _origin(request.headers.get("Origin", ""))
            host_ok = given_host in hosts or (wildcard and _ip_literal(given_host))
            origin_ok = origin in origins or (wildcard and host_ok and origin == f"http://{given_host}")
            if not (host_ok and origin_ok):
                raise web.HTTPForbidden(text="mgtutor serve: this page is not the one `mgtutor serve` printed "
                                             "(its Origin or Host is another site's); open the printed URL.\n")
        return await handler(request)

    return check


def access_logger() -> type:
    """aiohttp's access log without the query string (the token is in it) and without the Referer
    (the first page's URL, with the token, is the Referer of everything it loads)."""
    from aiohttp.abc import AbstractAccessLogger

    class PathOnlyAccessLogger(AbstractAccessLogger):
        def log(self, request: Any, response: Any, time: float) -> None:
            self.logger.info('%s "%s %s" %s %.3fs', request.remote, request.method, request.path,
                             response.status, time)

    return PathOnlyAccessLogger


def make_server(host: str, port: int, token: str, public_url: str | None = None) -> Any:
    from textual_serve.server import Server

    class TokenServer(Server):
        """textual-serve's server with the token check in front of every handler."""

        async def _make_app(self) -> Any:
            app = await super()._make_app()
            app.middlewares.append(token_check(token, port))
            app.middlewares.append(origin_check(host, port, public_url))
            return app

        def initialize_logging(self) -> None:
            """As textual-serve's, less the locals in tracebacks (a request's locals hold the token)."""
            from rich.logging import RichHandler

            logging.basicConfig(level="DEBUG" if self.debug else "INFO", format="%(message)s", datefmt="[%X]",
                                handlers=[RichHandler(show_path=False, show_time=False, rich_tracebacks=True,
                                                      tracebacks_show_locals=False, console=self.console)])

        def serve(self, debug: bool = False) -> None:
            """textual-serve's serve(), with the access log that leaves the token out."""
            from aiohttp import web

            self.debug = debug
            self.initialize_logging()
            loop = asyncio.new_event_loop()
            asyncio.set_event_loop(loop)
            for signum in (signal.SIGINT, signal.SIGTERM):
                try:
                    loop.add_signal_handler(signum, self.request_exit)
                except (NotImplementedError, RuntimeError):
                    pass
            web.run_app(self._make_app(), host=self.host, port=self.port, handle_signals=False, loop=loop,
                        print=lambda *args: None, access_log_class=access_logger())

        async def on_startup(self, app: Any) -> None:
            print(startup_text(host, port, self.public_url, token), flush=True)

        async def on_shutdown(self, app: Any) -> None:
            # before aiohttp waits for the open websockets: their apps go, so the server can too
            await asyncio.get_running_loop().run_in_executor(None, stop_apps)

    return TokenServer(app_command(), host=host, port=port, title="mgtutor",
                       public_url=public_url or f"http://localhost:{port}")


def stop_apps(grace_s: float = 5.0) -> int:
    """SIGTERM every app process this server started (one per browser tab), SIGKILL what is left after
    `grace_s`; returns how many there were. textual-serve would wait up to a minute for each tab."""
    import psutil

    apps = psutil.Process().children(recursive=True)
    for proc in apps:
        try:
            proc.terminate()
        except psutil.Error:
            pass
    _gone, alive = psutil.wait_procs(apps, timeout=grace_s)
    for proc in alive:
        try:
            proc.kill()
        except psutil.Error:
            pass
    psutil.wait_procs(alive, timeout=grace_s)
    return len(apps)


def startup_text(host: str, port: int, public_url: str, token: str) -> str:
    lines = ["mgtutor serve: " + _("listening on {address}").format(address=f"{host}:{port}"),
             _("open: {url}").format(url=f"{public_url.rstrip('/')}/?token={token}")]
    if host in ("127.0.0.1", "localhost", "::1"):
        lines.append(_("from another machine, tunnel over SSH first: {command}").format(
            command=f"ssh -L {port}:localhost:{port} THIS-HOST"))
    else:
        lines.append(_("listening beyond this machine ({host}): anyone who can reach the port still needs the "
                       "token").format(host=host))
    lines.append(_("behind Jupyter: {command}").format(
        command=f"mgtutor serve --public-url https://JUPYTER/user/NAME/proxy/{port}"))
    lines.append(_("Ctrl+C stops the server and every app it started"))
    return "\n".join(lines)


def port_problem(host: str, port: int) -> str | None:
    """Why the server could not listen there, said before the URL is printed (aiohttp binds after)."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        return f"--host {host}: {exc.strerror or exc}"
    except (UnicodeError, ValueError):  # a label over 63 characters, a NUL: the IDNA codec refuses it
        return _("--host {host}: not a host name or address (a name's parts are at most 63 characters)").format(
            host=host[:80])
    family, _type, _proto, _name, address = infos[0]
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as aiohttp does
        try:
            probe.bind(address)
        except OSError as exc:
            return _("cannot listen on {host}:{port}: {error}").format(host=host, port=port, error=exc.strerror or exc)
    return None


def main(args: argparse.Namespace) -> int:
    if not 0 < args.port < 65536:
        raise CliError(_("--port {port}: give a port between 1 and 65535").format(port=args.port))
    try:
        import textual_serve  # noqa: F401
    except ImportError:
        raise CliError(_("textual-serve is not installed: pip install textual-serve")) from None
    problem = port_problem(args.host, args.port)
    if problem:
        raise CliError(problem)
    token = secrets.token_urlsafe(24)
    server = make_server(args.host, args.port, token, args.public_url)
    try:
        server.serve()
    except OSError as exc:
        raise CliError(_("cannot listen on {host}:{port}: {error}").format(host=args.host, port=args.port,
                                                                            error=exc.strerror or exc)) from None
    return 0
