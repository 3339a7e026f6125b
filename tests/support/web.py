"""A real `cronsvc web` process on a free loopback port, for the API and browser tests."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import yaml

from cronsvc.process.redis_server import free_port
from tests.support.paths import ROOT
from tests.support.wait import wait_for

#: An operator token long enough for any bind.
OPERATOR_TOKEN = "operator-secret-0123456789"


def one_job_file(tmp: Path) -> Path:
    """A job file of one on-demand command job, ``digest``."""
    path = tmp / "schedules.yaml"
    path.write_text(yaml.safe_dump({"jobs": {"digest": {"command": ["true"]}}}))
    return path


class WebServer:
    """``python -m cronsvc web`` on ``config`` and ``redis_url``; ``env`` adds variables
    (tokens). Use as a context manager: started on enter, stopped on exit."""

    def __init__(self, tmp: Path, redis_url: str, config: Path, *args: str,
                 env: dict[str, str] | None = None) -> None:
        self.tmp = tmp
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = tmp / f"web-{self.port}.log"
        self.argv = [sys.executable, "-m", "cronsvc", "web", "--config", str(config),
                     "--redis-url", redis_url, "--port", str(self.port), *args]
        self.env = {k: v for k, v in os.environ.items()
                    if not k.startswith("CRONSVC_WEB_")}
        self.env.update(env or {}, PYTHONPATH=str(ROOT))
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
