"""A TCP relay in front of a real redis-server that can lose one reply: the request
reaches Redis and runs, and the connection is cut before its reply comes back, as when
Redis dies or the network drops just after a write. What a client does next (try again,
and find its own write) is what the tests check."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager


class Relay:
    """Forwards ``127.0.0.1:<port>`` to ``upstream``; the first request that contains
    ``cut`` (once set) runs upstream and its connection is closed before the reply."""

    def __init__(self, upstream_port: int) -> None:
        self.upstream_port = upstream_port
        self.cut: bytes | None = None
        self.cuts = 0
        self._server = socket.create_server(("127.0.0.1", 0))
        self.port = self._server.getsockname()[1]
        self._lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._server.accept()
            except OSError:
                return  # closed
            upstream = socket.create_connection(("127.0.0.1", self.upstream_port))
            threading.Thread(target=self._serve, args=(client, upstream), daemon=True).start()

    def _take_cut(self, data: bytes) -> bool:
        with self._lock:
            if self.cut is not None and self.cut in data:
                self.cut = None
                self.cuts += 1
                return True
            return False

    def _serve(self, client: socket.socket, upstream: socket.socket) -> None:
        """Both ways at once; once the request to cut went upstream, the next bytes back
        close both ends instead of reaching the client."""
        cutting = threading.Event()

        def back() -> None:
            try:
                while data := upstream.recv(65536):
                    if cutting.is_set():
                        break
                    client.sendall(data)
            except OSError:
                pass
            for end in (client, upstream):
                end.close()

        threading.Thread(target=back, daemon=True).start()
        try:
            while data := client.recv(65536):
                if self._take_cut(data):
                    cutting.set()
                upstream.sendall(data)
        except OSError:
            pass

    def close(self) -> None:
        self._server.close()


@contextmanager
def relay(upstream_port: int) -> Iterator[Relay]:
    r = Relay(upstream_port)
    try:
        yield r
    finally:
        r.close()
