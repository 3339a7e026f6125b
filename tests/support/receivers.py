"""Real receivers for notification and ``http`` job tests: an HTTP(S) server that records
what it is sent (and answers as told, a redirect too, or not at all), and an SMTP server
(aiosmtpd) that keeps the mail it takes and every AUTH tried on it, in plain text, with
STARTTLS or with TLS from the start."""

from __future__ import annotations

import select
import ssl
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from email import message_from_bytes
from email.message import Message
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from cronsvc.process.redis_server import free_port


@dataclass
class Received:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    peer: tuple[str, int] = ("", 0)  # the client's address: one per connection


@dataclass
class HttpReceiver:
    url: str
    received: list[Received] = field(default_factory=list)
    statuses: list[int] = field(default_factory=list)  # answers to give, then 200
    location: str | None = None  # sent as Location with each answer (for a 3xx)
    hang: threading.Event | None = None  # set: the receiver holds each request until clear
    answer: bytes = b"ok"  # the body of each answer
    stall: bool = False  # true: no answer at all, until the client hangs up
    gone: threading.Event = field(default_factory=threading.Event)  # a stalled client hung up
    keep_alive: bool = False  # true: HTTP/1.1, the connection kept for the client's next request
    cookie: str | None = None  # sent as Set-Cookie with each answer


@contextmanager
def http_receiver(tls: ssl.SSLContext | None = None) -> Iterator[HttpReceiver]:
    """An HTTP server on a free loopback port; HTTPS with the server context ``tls``."""
    port = free_port()
    box = HttpReceiver(f"{'https' if tls else 'http'}://127.0.0.1:{port}")

    class Handler(BaseHTTPRequestHandler):
        @property
        def protocol_version(self) -> str:  # type: ignore[override]
            return "HTTP/1.1" if box.keep_alive else "HTTP/1.0"

        def do_POST(self) -> None:  # noqa: N802 - the stdlib's name
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            if box.hang is not None:
                box.hang.wait(30)
            box.received.append(Received(self.command, self.path, dict(self.headers.items()),
                                         body, self.client_address))
            if box.stall:
                self.close_connection = True
                readable, _, _ = select.select([self.connection], [], [], 30)
                if readable and not self.connection.recv(1):
                    box.gone.set()
                return
            status = box.statuses.pop(0) if box.statuses else 200
            self.send_response(status)
            if box.location is not None:
                self.send_header("Location", box.location)
            if box.cookie is not None:
                self.send_header("Set-Cookie", box.cookie)
            self.send_header("Content-Length", str(len(box.answer)))
            self.end_headers()
            self.wfile.write(box.answer)

        # A client that follows a redirect may come back with GET: recorded too.
        do_GET = do_PUT = do_PATCH = do_DELETE = do_POST  # noqa: N815 - the stdlib's names

        def log_message(self, *args: Any) -> None:
            pass

    with serving(port, Handler, tls):
        yield box


@contextmanager
def serving(port: int, handler: type[BaseHTTPRequestHandler],
            tls: ssl.SSLContext | None = None) -> Iterator[ThreadingHTTPServer]:
    """A threading HTTP server of ``handler`` on a loopback ``port``, in a thread."""
    server = ThreadingHTTPServer(("127.0.0.1", port), handler)
    server.daemon_threads = True
    if tls is not None:
        server.socket = tls.wrap_socket(server.socket, server_side=True)
    # shutdown() waits for the loop's next look at its flag: half a second by default.
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05},
                              daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


@dataclass
class SmtpReceiver:
    port: int
    messages: list[Message] = field(default_factory=list)
    envelopes: list[tuple[str, list[str]]] = field(default_factory=list)
    logins: list[tuple[str, str]] = field(default_factory=list)  # each AUTH tried: user, password


@contextmanager
def smtp_receiver(tls: ssl.SSLContext | None = None,
                  implicit: bool = False) -> Iterator[SmtpReceiver]:
    """An SMTP server on a free loopback port. With a server context ``tls`` it offers
    STARTTLS, or speaks TLS from the start when ``implicit``; without, it offers no TLS.
    It offers AUTH with or without TLS (a careless client's password is then recorded in
    ``logins``) and takes any credentials."""
    from aiosmtpd.controller import Controller
    from aiosmtpd.smtp import AuthResult, LoginPassword

    box = SmtpReceiver(free_port())

    class Handler:
        async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:  # noqa: N802
            box.envelopes.append((envelope.mail_from, list(envelope.rcpt_tos)))
            box.messages.append(message_from_bytes(envelope.content))
            return "250 OK"

    def authenticator(server: Any, session: Any, envelope: Any, mechanism: str,
                      data: Any) -> AuthResult:
        if isinstance(data, LoginPassword):
            box.logins.append((data.login.decode(), data.password.decode()))
        return AuthResult(success=True)

    tls_args: dict[str, Any] = {}
    if tls is not None:
        tls_args = {"ssl_context": tls} if implicit else {"tls_context": tls}
    controller = Controller(Handler(), hostname="127.0.0.1", port=box.port,
                            authenticator=authenticator, auth_require_tls=False, **tls_args)
    controller.start()
    try:
        yield box
    finally:
        controller.stop()
