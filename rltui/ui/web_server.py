"""The web server of `rltui serve`: textual-serve's, with its pages pointing at the address
their browser used (textual-serve would write the bound address into them: 0.0.0.0 is
nowhere to a browser), every request refused without the server's token (another user of
this machine reaches 127.0.0.1 too), its websocket refusing pages of other sites (and names
it does not know, which a site could rebind to this machine), and a quiet terminal:
one line to say where to open it, one per browser tab; each request only with --verbose.

Imports textual-serve: only once `rltui serve` has found it installed."""

from __future__ import annotations

import copy
import hmac
import ipaddress
import logging
import re
import socket
import sys
from urllib.parse import quote, urlsplit

import aiohttp_jinja2
import jinja2
from aiohttp import web
from textual_serve.server import Server

ANY_ADDRESS = ("0.0.0.0", "::", "")
TOKEN_PARAMETER = "token"
TOKEN_IN_URL = re.compile(rf"([?&]{TOKEN_PARAMETER}=)[^&\s]*")
# A stylesheet the page would fetch from another site (textual-serve's asks Google for a web font).
OUTSIDE_LINK = re.compile(r"<link\b[^>]*\bhref=\"https?://[^\"]*\"[^>]*>", re.IGNORECASE)
REFUSED_PAGE = ("403: this dashboard needs its token. Open the address `rltui serve` printed when it started "
                "(it ends in ?token=...).")


def open_url(host: str, port: int, public_url: str | None = None) -> str:
    """The address to open the dashboard at, for the line serve starts with: the public
    URL given, else the address bound, or this machine's name when bound to all of them."""
    if public_url:
        return public_url
    name = socket.gethostname() if host in ANY_ADDRESS else host
    if ":" in name:
        name = f"[{name}]"  # IPv6
    return f"http://{name}" if port == 80 else f"http://{name}:{port}"


def with_token(url: str, token: str | None) -> str:
    """`url` with the token that opens the dashboard (the first page sets it as a cookie
    for the rest: the stylesheets, the scripts, the websocket)."""
    if not token:
        return url
    return f"{url.rstrip('/')}/?{TOKEN_PARAMETER}={quote(token, safe='')}"


def same_token(given: str | None, token: str) -> bool:
    # In constant time, so the answer's timing says nothing of how much of a guess is right.
    return given is not None and hmac.compare_digest(given.encode("utf-8", "replace"), token.encode("utf-8"))


def origin_of(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}".lower()


class LocalOnlyTemplates(jinja2.FileSystemLoader):
    """textual-serve's page templates less their stylesheets from other sites: a dashboard
    behind its owner's token tells no one else that it was opened, and looks the same
    offline (the terminal's font falls back to the browser's monospace)."""

    def get_source(self, environment: jinja2.Environment, template: str):
        source, filename, uptodate = super().get_source(environment, template)
        return OUTSIDE_LINK.sub("", source), filename, uptodate


def hide_token(record: logging.LogRecord) -> bool:
    """The access log's lines without the token: a terminal's scrollback or a saved log
    is not the token's place."""
    if isinstance(record.msg, str):
        record.msg = TOKEN_IN_URL.sub(r"\1[secret]", record.msg)
    return True


class DashboardServer(Server):
    def __init__(self, command: str, *, host: str, port: int, title: str, run_dir: str,
                 public_url: str | None = None, verbose: bool = False, out=None, token: str | None = None):
        super().__init__(command, host=host, port=port, title=title, public_url=public_url)
        self.token = token or None
        # Cookies are kept per host name, not per port: another serve on this machine has its own.
        self.cookie_name = f"rltui-token-{port}"
        self.fixed_url = public_url.rstrip("/") if public_url else None
        if self.fixed_url:
            self.public_url = self.fixed_url
        self.run_dir = run_dir
        self.verbose = verbose
        self.out = out

    def say(self, line: str) -> None:
        print(f"rltui: {line}", file=self.out or sys.stderr, flush=True)

    def initialize_logging(self) -> None:
        super().initialize_logging()
        # aiohttp logs every request (with its user agent) at INFO: only with --verbose.
        access = logging.getLogger("aiohttp.access")
        access.setLevel(logging.INFO if self.verbose else logging.WARNING)
        access.addFilter(hide_token)

    async def on_startup(self, app: web.Application) -> None:
        # In place of textual-serve's banner, which names the bound address (0.0.0.0 too).
        where = with_token(open_url(self.host, self.port, self.fixed_url), self.token)
        also = "; or this machine's address" if self.host in ANY_ADDRESS and not self.fixed_url else ""
        self.say(f"serving the dashboard of {self.run_dir}: open {where}{also} (Ctrl+C stops)")

    async def _make_app(self) -> web.Application:
        app = await super()._make_app()
        aiohttp_jinja2.setup(app, loader=LocalOnlyTemplates(self.templates_path))
        app.middlewares.append(self.require_token)
        return app

    @web.middleware
    async def require_token(self, request: web.Request, handler):
        """Every request (the page, its assets, the websocket, a download) carries the token:
        in the URL the first time, then in the cookie that page gets (HttpOnly: no script
        reads it; SameSite=Strict: no other site's page sends it), or as `Authorization:
        token TOKEN` from a script."""
        if self.token is None:
            return await handler(request)
        in_url = request.query.get(TOKEN_PARAMETER)
        scheme, _, in_header = request.headers.get("Authorization", "").partition(" ")
        given = in_url or (in_header.strip() if scheme.lower() in ("token", "bearer") else None)
        presented = given or request.cookies.get(self.cookie_name)
        if not same_token(presented, self.token):
            if request.path in ("/", "/ws"):  # a browser's asset requests would repeat it
                how = "with a wrong token" if presented else "without the dashboard's token"
                self.say(f"refused a request from {request.remote} {how} ({request.path})")
            raise web.HTTPForbidden(text=REFUSED_PAGE)
        response = await handler(request)
        if in_url and not response.prepared:
            secure = (self.fixed_url or str(request.url)).startswith("https:")
            response.set_cookie(self.cookie_name, self.token, path="/", httponly=True, samesite="Strict",
                                secure=secure)
        return response

    def page_url(self, request: web.Request) -> str:
        """Where a page's stylesheets, scripts and websocket are: the public URL given, or
        the address its browser asked for (its Host), which reaches this server."""
        return self.fixed_url or f"{request.scheme}://{request.host}"

    def known_host(self, request: web.Request) -> bool:
        """A page of another site whose name is made to point at this machine (DNS rebinding)
        sends that name as its Host, and its Origin matches: only this machine's names, the
        public URL's and plain addresses (which no site can rebind) are served."""
        name = (urlsplit(f"//{request.host}").hostname or "").rstrip(".").lower()
        try:
            ipaddress.ip_address(name)
            return True
        except ValueError:
            pass
        names = {"localhost", socket.gethostname().lower(), socket.getfqdn().lower()}
        if self.host not in ANY_ADDRESS:
            names.add(self.host.lower())
        if self.fixed_url:
            names.add((urlsplit(self.fixed_url).hostname or "").lower())
        return name in names

    def refuse_unknown_host(self, request: web.Request) -> None:
        if not self.known_host(request):
            self.say(f"refused a request for another name ({request.host}); open it at this machine's name or "
                     "address, or give --public-url")
            raise web.HTTPForbidden(text="not this dashboard's address")

    @aiohttp_jinja2.template("app_index.html")
    async def handle_index(self, request: web.Request):
        self.refuse_unknown_host(request)
        page = copy.copy(self)  # textual-serve builds every URL from public_url
        page.public_url = self.page_url(request)
        return await Server.handle_index.__wrapped__(page, request)

    def same_site(self, request: web.Request) -> bool:
        """Browsers let any page open a websocket anywhere, and send its Origin: only the
        dashboard's own page may drive it. Clients that are not browsers send none."""
        origin = request.headers.get("Origin")
        if origin is None:
            return True
        allowed = {origin_of(f"{request.scheme}://{request.host}")}
        if self.fixed_url:
            allowed.add(origin_of(self.fixed_url))
        return origin.lower() in allowed

    async def handle_websocket(self, request: web.Request) -> web.WebSocketResponse:
        self.refuse_unknown_host(request)
        if not self.same_site(request):
            self.say(f"refused a connection from a page of another site ({request.headers.get('Origin')})")
            raise web.HTTPForbidden(text="not this dashboard's page")
        self.say(f"a browser tab attached from {request.remote}")
        return await super().handle_websocket(request)
