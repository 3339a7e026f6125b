"""Real workers of the queues cronsvc dispatches into (Celery, RQ, dramatiq, arq), started
as processes on the test's brokers, and the ledger their tasks write (one line per run)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tests.support.paths import ROOT


class QueueWorker:
    """One worker process of a queue library, its output in ``log``."""

    def __init__(self, tmp: Path, name: str, argv: list[str], env: dict[str, str]) -> None:
        self.log_path = tmp / f"{name}.log"
        log = open(self.log_path, "ab")  # noqa: SIM115 - closed with the process
        self.proc = subprocess.Popen(argv, cwd=tmp, env=env, stdout=log, stderr=log,
                                     stdin=subprocess.DEVNULL)
        log.close()

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


def queue_env(redis_url: str, ledger: Path, **more: str) -> dict[str, str]:
    """The environment a queue's worker runs in: cronsvc's Redis for the guard, the
    ledger its test tasks write, and this checkout on the path."""
    return dict(os.environ, PYTHONPATH=str(ROOT), CRONSVC_REDIS_URL=redis_url,
                CRONSVC_TEST_LEDGER=str(ledger), **more)


@contextmanager
def celery_worker(tmp: Path, broker: str, redis_url: str, ledger: Path,
                  name: str = "celery", app: str = "tests.support.celery_app"
                  ) -> Iterator[QueueWorker]:
    """``celery worker --pool solo`` on ``broker``, running the tasks of module ``app``
    (tests/support/celery_app.py's unless told)."""
    argv = [sys.executable, "-m", "celery", "-A", app, "worker",
            "--pool", "solo", "--loglevel", "INFO", "--without-gossip", "--without-mingle",
            "--without-heartbeat", "-n", f"{name}@%h"]
    worker = QueueWorker(tmp, name, argv, queue_env(redis_url, ledger,
                                                    CELERY_BROKER_URL=broker))
    try:
        yield worker
    finally:
        worker.stop()


def read_runs(ledger: Path) -> list[dict[str, Any]]:
    """The runs the test tasks noted, in order."""
    if not ledger.exists():
        return []
    return [json.loads(line) for line in ledger.read_text().splitlines() if line.strip()]
