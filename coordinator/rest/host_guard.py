"""Open mode answers only requests addressed to this machine by name (DNS rebinding).

In open mode (no token file) every caller is an admin, and the ingress relies on listening
on loopback (auth.require_safe_listen): only processes of this machine reach it. A web page
open in the developer's browser is such a process by proxy. Through DNS rebinding
(`evil.example` first resolving to the attacker's server, then to 127.0.0.1) the page's
requests reach the ingress with `Host: evil.example`, and the browser lets the page read
the answers, as they are of its own origin: it could commit or roll back any transaction
and read every check's body. The Host header is what the page cannot forge, so in open mode
a request naming another host is refused with 421 Misdirected Request before anything else
runs. With tokens the page has none to send, and any Host is served (a proxy in front may
rewrite it).

A page on another site needs no rebinding to *send* a request: a cross-site GET (an image,
a no-cors fetch) reaches the ingress with the right Host, and `GET /v1/check-requests` hands
checks out, so a page could drain them. The browser names such a request's origin
(`Sec-Fetch-Site: cross-site`, or an `Origin` header), which the page cannot forge either:
in open mode it is refused with 403 too. Pages of this machine (`Origin: http://localhost:...`,
the ingress's own /docs) are served.
"""

from __future__ import annotations

from typing import Any

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Receive, Scope, Send

from coordinator.core.listen_safety import is_loopback
from coordinator.rest.errors import error_response


def host_name(host_header: str) -> str:
    """Return the name of a Host header without its port: `[::1]:8080` -> `::1`."""
    host = host_header.strip().lower()
    if host.startswith("["):  # an IPv6 literal; its port, if any, follows the bracket
        return host[1 : host.find("]")] if "]" in host else host
    name, _, _port = host.partition(":")
    return name.rstrip(".")  # `localhost.` is the same name, fully qualified


def cross_site(headers: Headers, listen_host: str) -> bool:
    """Return True if a browser says the request comes from a page of another site."""
    if headers.get("sec-fetch-site", "").lower() == "cross-site":
        return True
    origin = headers.get("origin")
    if origin is None:
        return False
    _scheme, _, rest = origin.partition("://")
    return not rest or not allowed_host(rest.split("/", 1)[0], listen_host)  # "null": refused


def allowed_host(host_header: str | None, listen_host: str) -> bool:
    """Return True if the Host header names this machine: a loopback name or address, or
    the listen address `rest.host` itself. A request without one (HTTP/1.0) comes from no
    browser, which always sends it."""
    if host_header is None:
        return True
    name = host_name(host_header)
    return is_loopback(name) or name == host_name(listen_host)


class HostGuard:
    """In open mode, answer 421 to a request whose Host is not this machine's name."""

    def __init__(self, app: ASGIApp, listen_host: str) -> None:
        self.app = app
        self.listen_host = listen_host

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        host = headers.get("host")
        if not allowed_host(host, self.listen_host):
            await self._misdirected(host)(scope, receive, send)
        elif cross_site(headers, self.listen_host):
            response = error_response(
                403,
                "cross_site_request",
                "the ingress runs in open mode (no rest.auth_file) and serves no page of "
                "another site (its requests could commit, roll back or take checks)",
            )
            await response(scope, receive, send)
        else:
            await self.app(scope, receive, send)

    @staticmethod
    def _misdirected(host: str | None) -> Any:
        return error_response(
            421,
            "misdirected_request",
            f"the ingress runs in open mode (no rest.auth_file) and answers requests to "
            f"localhost or a loopback address only, not to host {(host or '')[:100]!r} "
            f"(a page in a browser could otherwise act through it)",
        )
