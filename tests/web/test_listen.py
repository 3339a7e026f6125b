"""The web's listening socket: what each connection it accepts inherits."""

from __future__ import annotations

import socket

from cronsvc.web.server import listen


def test_a_connection_the_web_accepts_sends_its_replies_at_once() -> None:
    # asyncio sets TCP_NODELAY only on sockets made with proto IPPROTO_TCP; without it a
    # reply written as headers then body waits for the client's delayed ACK (~40 ms) on
    # every request of a kept-alive connection.
    server = listen("127.0.0.1", 0)
    with server, socket.create_connection(server.getsockname()[:2]):
        accepted, _ = server.accept()
        with accepted:
            assert accepted.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)
