"""A real ``cronsvc web`` process on a free loopback port: the dashboard and the HTTP
API as a browser or a script meets them, for a test or a benchmark."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

from cronsvc.process.redis_server import free_port
from cronsvc.testing.children import child_env
from cronsvc.testing.wait import wait_for


class WebServer:
    """``python -m cronsvc web`` on ``config`` and ``redis_url``; ``env`` adds variables
    (tokens), and none of the caller's ``CRONSVC_WEB_*`` leak in. Use as a context
    manager: started on enter (once ``/healthz`` answers), stopped on exit."""

    def __init__(self, tmp: Path, redis_url: str, config: Path, *args: str,
                 env: dict[str, str] | None = None) -> None:
        self.tmp = tmp
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = tmp / f"web-{self.port}.log"
        self.argv = [sys.executable, "-m", "cronsvc", "web", "--config", str(config),
                     "--redis-url", redis_url, "--port", str(self.port), *args]
        own = {k: v for k, v in child_env().items() if not k.startswith("CRONSVC_WEB_")}
        self.env = {**own, **(env or {})}
        self.proc: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> WebServer:
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(self.argv, cwd=self.tmp, env=self.env, stdout=log,
                                         stderr=log, stdin=subprocess.DEVNULL)
        wait_for(self._up, timeout=30, message=f"cronsvc web on {self.url}\n{self.log()}")
        return self

    def _up(self) -> bool:
        assert self.proc is not None
        if self.proc.poll() is not None:
            raise AssertionError(f"cronsvc web exited {self.proc.returncode}:\n{self.log()}")
        try:
            return httpx.get(f"{self.url}/healthz", timeout=2).status_code == 200
        except httpx.TransportError:
            return False

    def __exit__(self, *exc: Any) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def client(self, token: str | None = None) -> httpx.Client:
        """An HTTP client on the server, sending ``token`` as a bearer token."""
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        return httpx.Client(base_url=self.url, headers=headers, timeout=30)

    @contextmanager
    def signed_in(self, token: str) -> Iterator[httpx.Client]:
        """A client that signed in with ``token`` as a browser does: the sign-in page
        (and its CSRF cookie), then the form with the CSRF token."""
        with httpx.Client(base_url=self.url, timeout=30) as http:
            http.get("/login")
            reply = http.post("/login", data={"token": token, "next": "/",
                                              "csrf": http.cookies["cronsvc_csrf"]})
            assert reply.status_code == 303 and "cronsvc_session" in http.cookies, reply.text
            yield http
