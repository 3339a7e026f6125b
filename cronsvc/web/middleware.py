"""What every request meets before the app reads it, and the headers every response
carries.

:class:`Gate` checks, in this order and before a byte of the body is read: the Host (a
name of this server, :mod:`cronsvc.web.hosts`), the declared size (``--max-body``), who
is asking (an unknown caller is answered 401, or sent to sign in, whatever it sent), and
for a change the CSRF token (:func:`cronsvc.web.security.csrf_ok`), reading a form body
for it under the same size limit. A body sent in chunks, with no size declared, is
counted as it arrives and refused once past the limit.
"""

from __future__ import annotations

import ipaddress
from urllib.parse import parse_qs, quote

from fastapi import Request
from fastapi.responses import RedirectResponse, Response
from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from cronsvc.web.hosts import AllowedHosts
from cronsvc.web.replies import error_reply
from cronsvc.web.security import (
    CSRF_COOKIE,
    CSRF_FIELD,
    CSRF_HEADER,
    SESSION_COOKIE,
    UNSAFE_METHODS,
    Guard,
    csrf_ok,
    new_csrf,
)

#: Paths anyone may reach: signing in, what the sign-in page needs, and the API's docs.
PUBLIC = ("/login", "/static/", "/healthz", "/api/docs", "/api/openapi.json")
#: Every page and asset is the server's own: no inline script or style, no other site,
#: and no framing (clickjacking). Swagger UI's styles hold data: images.
CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
       "connect-src 'self'; font-src 'self'; form-action 'self'; base-uri 'none'; "
       "frame-ancestors 'none'")
HEADERS = [(b"content-security-policy", CSP.encode()), (b"x-frame-options", b"DENY"),
           (b"x-content-type-options", b"nosniff"), (b"referrer-policy", b"same-origin")]


class SecureHeaders:
    """Sets :data:`HEADERS` on every response, error replies and crashes included (so it
    wraps the whole app, outside its error handling)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                names = {name for name, _ in HEADERS}
                kept = [(k, v) for k, v in message.get("headers", []) if k.lower() not in names]
                message = {**message, "headers": [*kept, *HEADERS]}
            await send(message)

        await self.app(scope, receive, send_with_headers if scope["type"] == "http" else send)


def too_large(limit: int) -> HTTPException:
    return HTTPException(413, f"the request body is over {limit:,} bytes (the server's "
                              "--max-body)")


def limited(receive: Receive, limit: int) -> Receive:
    """``receive``, refusing (413) a body that grows past ``limit`` bytes as it comes."""
    seen = 0

    async def counted() -> Message:
        nonlocal seen
        message = await receive()
        if message["type"] == "http.request":
            seen += len(message.get("body", b""))
            if seen > limit:
                raise too_large(limit)
        return message

    return counted


class Gate:
    """Host, size, who is asking and CSRF, before the app (see the module's doc)."""

    def __init__(self, app: ASGIApp, guard: Guard, hosts: AllowedHosts, max_body: int,
                 proxies: tuple[str, ...]) -> None:
        self.app = app
        self.guard = guard
        self.hosts = hosts
        self.max_body = max_body
        self.proxies = [ipaddress.ip_network(p) for p in proxies]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request = Request(scope)
        receive = limited(receive, self.max_body)
        refused = self._before_body(request)
        if refused is None and request.method in UNSAFE_METHODS:
            receive, refused = await self._csrf(request, receive)
        if refused is None:
            await self.app(scope, receive, send)
        else:
            await refused(scope, receive, send)

    def _before_body(self, request: Request) -> Response | None:
        request.state.https = self._https(request)
        host = request.headers.get("host")
        if request.url.path != "/healthz" and not self.hosts.allows(
                host, "https" if request.state.https else "http"):
            return error_reply(request, 400, self.hosts.refusal(host))
        length = request.headers.get("content-length", "0")
        if not length.isdigit() or int(length) > self.max_body:
            return error_reply(request, 413, str(too_large(self.max_body).detail))
        who = self.guard.identify(request.headers.get("authorization"),
                                  request.cookies.get(SESSION_COOKIE))
        request.state.identity = who
        request.state.csrf = request.cookies.get(CSRF_COOKIE) or new_csrf()
        path = request.url.path
        if who is None and not path.startswith(PUBLIC):
            if path.startswith("/api/"):
                return error_reply(request, 401, "sign in: send 'Authorization: Bearer "
                                                 "<token>'")
            return RedirectResponse(f"/login?next={quote(path)}", status_code=303)
        return None

    async def _csrf(self, request: Request, receive: Receive) -> tuple[Receive, Response | None]:
        """The CSRF verdict on a change; a form body read for its token is handed on."""
        sent = request.headers.get(CSRF_HEADER)
        if sent is None and request.headers.get("content-type", "").startswith(
                "application/x-www-form-urlencoded"):
            try:
                body = await _read(receive)
            except HTTPException as exc:
                return receive, error_reply(request, exc.status_code, str(exc.detail))
            fields = parse_qs(body.decode(errors="replace"))
            sent = fields[CSRF_FIELD][0] if fields.get(CSRF_FIELD) else None
            receive = _replay(body, receive)
        if not csrf_ok(request.state.identity, request.cookies.get(CSRF_COOKIE), sent,
                       request.headers.get("origin"), request.headers.get("sec-fetch-site"),
                       self.hosts):
            return receive, error_reply(request, 403, "CSRF check failed: reload the page and "
                                                      "try again")
        return receive, None

    def _https(self, request: Request) -> bool:
        """Whether the browser's side of the request is HTTPS: this server's own scheme,
        or what a proxy of ``--trusted-proxy`` says it got (the last X-Forwarded-Proto
        value: the one the nearest proxy set); anyone else's say is ignored."""
        if request.url.scheme == "https":
            return True
        peer = request.client.host if request.client else ""
        try:
            trusted = any(ipaddress.ip_address(peer) in net for net in self.proxies)
        except ValueError:
            return False
        said = request.headers.get("x-forwarded-proto", "").split(",")[-1].strip().lower()
        return trusted and said == "https"


async def _read(receive: Receive) -> bytes:
    chunks = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            break
    return b"".join(chunks)


def _replay(body: bytes, receive: Receive) -> Receive:
    """A receive that gives ``body`` once, then what ``receive`` gives (a disconnect)."""
    given = False

    async def again() -> Message:
        nonlocal given
        if given:
            return await receive()
        given = True
        return {"type": "http.request", "body": body, "more_body": False}

    return again
