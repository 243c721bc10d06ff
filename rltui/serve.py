"""The web server of `rltui serve`: textual-serve's, with its pages pointing at the address
their browser used (textual-serve would write the bound address into them: 0.0.0.0 is
nowhere to a browser), its websocket refusing pages of other sites (and names it does not
know, which a site could rebind to this machine), and a quiet terminal:
one line to say where to open it, one per browser tab; each request only with --verbose.

Imports textual-serve: only once `rltui serve` has found it installed."""

from __future__ import annotations

import copy
import ipaddress
import logging
import socket
import sys
from urllib.parse import urlsplit

import aiohttp_jinja2
from aiohttp import web
from textual_serve.server import Server

ANY_ADDRESS = ("0.0.0.0", "::", "")


def open_url(host: str, port: int, public_url: str | None = None) -> str:
    """The address to open the dashboard at, for the line serve starts with: the public
    URL given, else the address bound, or this machine's name when bound to all of them."""
    if public_url:
        return public_url
    name = socket.gethostname() if host in ANY_ADDRESS else host
    if ":" in name:
        name = f"[{name}]"  # IPv6
    return f"http://{name}" if port == 80 else f"http://{name}:{port}"


def origin_of(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}".lower()


class DashboardServer(Server):
    def __init__(self, command: str, *, host: str, port: int, title: str, run_dir: str,
                 public_url: str | None = None, verbose: bool = False, out=None):
        super().__init__(command, host=host, port=port, title=title, public_url=public_url)
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
        logging.getLogger("aiohttp.access").setLevel(logging.INFO if self.verbose else logging.WARNING)

    async def on_startup(self, app: web.Application) -> None:
        # In place of textual-serve's banner, which names the bound address (0.0.0.0 too).
        where = open_url(self.host, self.port, self.fixed_url)
        also = "; or this machine's address" if self.host in ANY_ADDRESS and not self.fixed_url else ""
        self.say(f"serving the dashboard of {self.run_dir}: open {where}{also} (Ctrl+C stops)")

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
