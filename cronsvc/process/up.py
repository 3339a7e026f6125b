"""``cronsvc up``: planner plus workers (plus a local redis-server) in one command.

Children run in their own sessions so that Ctrl-C reaches only this
supervisor, which then stops them in order: workers and planner first (they
finish or give back their runs), the embedded Redis last.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path

from cronsvc.clock import monotonic
from cronsvc.presence import process_id
from cronsvc.process.redis_server import RedisServer, free_port

log = logging.getLogger("cronsvc.up")

STATE_DIR = Path(".cronsvc")
URL_FILE = "redis.url"
RESTART_LIMIT = 5  # restarts of one child within RESTART_WINDOW before giving up
RESTART_WINDOW = 60.0


#: What `cronsvc up` tells its planner and workers the dashboard's address is.
WEB_URL_VAR = "CRONSVC_WEB_URL"


def embedded_url_file(state_dir: Path = STATE_DIR) -> Path:
    return state_dir / URL_FILE


def read_embedded_url(state_dir: Path = STATE_DIR) -> str | None:
    """URL of the redis-server a running ``cronsvc up`` started here, if any."""
    try:
        return embedded_url_file(state_dir).read_text().strip() or None
    except OSError:
        return None


def start_embedded(state_dir: Path = STATE_DIR) -> RedisServer:
    """Start redis-server with AOF under ``state_dir``, on the port it used last time."""
    port = None
    last = read_embedded_url(state_dir)
    if last:
        try:
            port = int(last.rsplit(":", 1)[1].split("/")[0])
        except (IndexError, ValueError):
            port = None
    server = RedisServer(state_dir / "redis", port=port or free_port())
    try:
        server.start()
    except Exception:
        if port is None:
            raise
        server = RedisServer(state_dir / "redis", port=free_port()).start()
    embedded_url_file(state_dir).write_text(server.url + "\n")
    return server


def wait_or_kill(named: list[tuple[str, subprocess.Popen[bytes]]], timeout: float) -> None:
    """Wait for each process, all within ``timeout`` seconds from now; kill one that has
    not ended by then (it was asked to stop: it had its chance)."""
    deadline = monotonic() + timeout
    for name, proc in named:
        try:
            proc.wait(max(deadline - monotonic(), 0.1))
        except subprocess.TimeoutExpired:
            log.error("%s did not stop within %.0fs: killing it", name, timeout)
            proc.kill()
            proc.wait()


@dataclass
class Child:
    name: str
    argv: list[str]
    proc: subprocess.Popen[bytes] | None = None
    starts: list[float] = field(default_factory=list)
    optional: bool = False  # the dashboard: the fleet runs on without it
    given_up: bool = False

    def start(self) -> None:
        self.starts = [t for t in self.starts if monotonic() - t < RESTART_WINDOW]
        self.starts.append(monotonic())
        self.proc = subprocess.Popen(self.argv, stdin=subprocess.DEVNULL, start_new_session=True)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def signal(self, sig: int) -> None:
        if self.alive():
            assert self.proc is not None
            self.proc.send_signal(sig)


class Supervisor:
    """Runs and watches the child processes of ``cronsvc up``."""

    def __init__(self, config: str, redis_url: str | None, workers: int, *,
                 concurrency: int | None = None, log_format: str = "human",
                 metrics_port: int | None = None, stop_timeout: float = 60.0,
                 state_dir: Path = STATE_DIR, web_port: int | None = None,
                 web_host: str = "127.0.0.1", web_args: list[str] | None = None,
                 reload: bool = False) -> None:
        self.config = config
        self.redis_url = redis_url
        self.workers = workers
        self.concurrency = concurrency
        self.log_format = log_format
        self.metrics_port = metrics_port
        self.stop_timeout = stop_timeout  # longer than the workers' grace period
        self.state_dir = state_dir
        self.web_port = web_port  # None: no dashboard
        self.web_host = web_host
        self.web_args = web_args or []  # more options of `cronsvc web` (--allowed-host)
        self.reload = reload  # workers run afresh when their code changes
        self.server: RedisServer | None = None
        self.children: list[Child] = []
        self._stop = threading.Event()
        self._signals = 0

    def _argv(self, role: str, name: str, index: int = 0) -> list[str]:
        argv = [sys.executable, "-m", "cronsvc", role, "--config", self.config,
                "--redis-url", self.redis_url or "", "--log-format", self.log_format]
        if role == "web":
            return [*argv, "--host", self.web_host, "--port", str(self.web_port),
                    *self.web_args]
        argv += ["--name", name]
        if role == "worker":  # workers of their own: a host's processes, on one host
            argv += ["--processes", "1"]
        if role == "worker" and self.concurrency:
            argv += ["--concurrency", str(self.concurrency)]
        if role == "worker" and self.reload:
            argv.append("--reload")
        if self.metrics_port is not None:  # planner on the port, worker i on port + i
            argv += ["--metrics-port", str(self.metrics_port + index if self.metrics_port else 0)]
        return argv

    def handle_signal(self) -> None:
        """SIGTERM or Ctrl-C: children stop (workers let running jobs finish); a second
        one is passed on too, and makes workers give their running fires back now."""
        self._signals += 1
        if self._signals == 1:
            log.info("stopping: running jobs may finish (signal again to stop at once)")
        else:
            log.info("stopping at once")
        for child in self.children:
            child.signal(signal.SIGTERM)
        self._stop.set()

    def run(self) -> int:
        if not self.redis_url:
            self.state_dir.mkdir(exist_ok=True)
            self.server = start_embedded(self.state_dir)
            self.redis_url = self.server.url
            log.info("embedded redis-server %s (data in %s)", self.redis_url,
                     self.server.data_dir)
        if self.web_port is not None:
            # The dashboard's address, for the jobs of the file (an `http` job's
            # ${CRONSVC_WEB_URL}/healthz): the port may be any, `make run PORT=...`.
            host = "127.0.0.1" if self.web_host in ("0.0.0.0", "") else self.web_host
            os.environ[WEB_URL_VAR] = f"http://{host}:{self.web_port}"
        # Ids must be unique across the fleet: `up` may run on several hosts.
        here = process_id()
        self.children = [Child("planner", self._argv("planner", f"planner@{here}"))]
        self.children += [Child(f"worker-{i}", self._argv("worker", f"worker-{i}@{here}", i))
                          for i in range(1, self.workers + 1)]
        if self.web_port is not None:
            self.children.append(Child("web", self._argv("web", "web"), optional=True))
        for child in self.children:
            child.start()
        log.info("cronsvc up: 1 planner, %d worker(s) on %s; Ctrl-C to stop",
                 self.workers, self.config)
        # The dashboard says its address itself, once it listens.
        code = 0
        try:
            code = self._watch()
        finally:
            self._shutdown()
        return code

    def _watch(self) -> int:
        while not self._stop.wait(0.5):
            for child in self.children:
                if child.alive() or child.proc is None or child.given_up:
                    continue
                rc = child.proc.returncode
                if len(child.starts) >= RESTART_LIMIT and child.optional:
                    log.error("%s keeps exiting (last code %s): the rest runs on without it",
                              child.name, rc)
                    child.given_up = True
                    continue
                if len(child.starts) >= RESTART_LIMIT:
                    log.error("%s keeps exiting (last code %s): stopping", child.name, rc)
                    return 1
                log.warning("%s exited with code %s: restarting", child.name, rc)
                child.start()
        return 0

    def _shutdown(self) -> None:
        if self._signals == 0:  # leaving on our own (a child kept failing)
            for child in self.children:
                child.signal(signal.SIGTERM)
        wait_or_kill([(c.name, c.proc) for c in self.children if c.proc is not None],
                     self.stop_timeout)
        if self.server is not None:
            self.server.stop()
            try:
                os.unlink(embedded_url_file(self.state_dir))
            except OSError:
                pass
        log.info("cronsvc up: stopped")
