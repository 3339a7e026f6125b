"""An HTTP server that answers every request with ``204 No Content`` and counts them: the
other side of the ``http`` jobs that ``bench/cost.py`` drains.

It runs as a process of its own (``python -m bench.http_sink``), so its CPU is neither the
benchmark's nor the workers'. It prints its port on the first line of its output, and the
number of requests it answered on each line it reads from its input.
"""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

ANSWERED = [0]
_LOCK = threading.Lock()


class Sink(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def _answer(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        self.send_response(204)
        self.send_header("Content-Length", "0")
        self.end_headers()
        with _LOCK:
            ANSWERED[0] += 1

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = _answer

    def log_message(self, format: str, *args: object) -> None:
        pass


class SinkServer(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 1024


@contextmanager
def running() -> Iterator[tuple[str, subprocess.Popen[str]]]:
    """The sink in a process of its own: its URL, and the process."""
    proc = subprocess.Popen([sys.executable, "-m", "bench.http_sink"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        port = int(proc.stdout.readline())
        yield f"http://127.0.0.1:{port}/fire", proc
    finally:
        proc.terminate()
        proc.wait(30)


def answered(proc: subprocess.Popen[str]) -> int:
    """How many requests the sink of :func:`running` answered so far."""
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write("\n")
    proc.stdin.flush()
    return int(proc.stdout.readline())


def main() -> None:
    server = SinkServer(("127.0.0.1", 0), Sink)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    print(server.server_port, flush=True)
    for _ in sys.stdin:
        with _LOCK:
            print(ANSWERED[0], flush=True)


if __name__ == "__main__":
    main()
