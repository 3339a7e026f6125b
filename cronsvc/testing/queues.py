"""Real workers of the queues cronsvc dispatches into (Celery, RQ, dramatiq, arq), as
processes beside a test's fleet: a ``celery:`` job is only proven by a Celery worker
that runs its task, with the guard of :mod:`cronsvc.contrib`."""

from __future__ import annotations

import signal
import subprocess
import sys
from os import PathLike
from pathlib import Path

from cronsvc.testing.children import child_env


class QueueWorker:
    """One worker process of a queue library, run from ``tmp`` with its output in
    ``tmp/<name>.log``; stopped (SIGTERM, then SIGKILL) when the ``with`` block ends."""

    def __init__(self, tmp: Path, name: str, argv: list[str], env: dict[str, str]) -> None:
        self.log_path = tmp / f"{name}.log"
        log = open(self.log_path, "ab")  # noqa: SIM115 - closed with the process
        self.proc = subprocess.Popen(argv, cwd=tmp, env=env, stdout=log, stderr=log,
                                     stdin=subprocess.DEVNULL)
        log.close()

    def __enter__(self) -> QueueWorker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def celery_worker(tmp: Path, app: str, broker: str, redis_url: str, *, name: str = "celery",
                  path: tuple[str | PathLike[str], ...] = (), **env: str) -> QueueWorker:
    """``celery -A app worker --pool solo`` on ``broker``, its guard on cronsvc's Redis
    at ``redis_url`` (``CRONSVC_REDIS_URL``), importing what this process imports."""
    argv = [sys.executable, "-m", "celery", "-A", app, "worker", "--pool", "solo",
            "--loglevel", "INFO", "--without-gossip", "--without-mingle",
            "--without-heartbeat", "-n", f"{name}@%h"]
    return QueueWorker(tmp, name, argv, child_env(path, CRONSVC_REDIS_URL=redis_url,
                                                  CELERY_BROKER_URL=broker, **env))
