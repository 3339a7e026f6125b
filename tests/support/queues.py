"""Real workers of the queues cronsvc dispatches into (Celery, RQ, dramatiq, arq), started
as processes on the test's brokers, and the ledger their tasks write (one line per run)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

from cronsvc.testing.queues import QueueWorker
from cronsvc.testing.queues import celery_worker as testing_celery_worker
from tests.support.paths import ROOT


def queue_env(redis_url: str, ledger: Path, **more: str) -> dict[str, str]:
    """The environment a queue's worker runs in: cronsvc's Redis for the guard, the
    ledger its test tasks write, and this checkout on the path."""
    return dict(os.environ, PYTHONPATH=str(ROOT), CRONSVC_REDIS_URL=redis_url,
                CRONSVC_TEST_LEDGER=str(ledger), **more)


def celery_worker(tmp: Path, broker: str, redis_url: str, ledger: Path,
                  name: str = "celery", app: str = "tests.support.celery_app") -> QueueWorker:
    """``celery worker --pool solo`` on ``broker``, running the tasks of module ``app``
    (tests/support/celery_app.py's unless told), noting each run in ``ledger``."""
    return testing_celery_worker(tmp, app, broker, redis_url, name=name, path=(ROOT,),
                                 CRONSVC_TEST_LEDGER=str(ledger))


def read_runs(ledger: Path) -> list[dict[str, Any]]:
    """The runs the test tasks noted, in order."""
    if not ledger.exists():
        return []
    return [json.loads(line) for line in ledger.read_text().splitlines() if line.strip()]


def rq_worker(tmp: Path, url: str, redis_url: str, ledger: Path, queue: str = "default",
              name: str = "rq") -> QueueWorker:
    """``rq worker`` on RQ's Redis at ``url``, with cronsvc's guard as its job class and
    JSON as its serializer, running tests/support/rq_jobs.py."""
    argv = [sys.executable, "-m", "rq.cli", "worker", "--job-class",
            "cronsvc.contrib.rq.GuardedJob", "--serializer", "rq.serializers.JSONSerializer",
            "--url", url, "--name", f"{name}-{os.getpid()}", queue]
    return QueueWorker(tmp, name, argv, queue_env(redis_url, ledger))


def dramatiq_worker(tmp: Path, broker: str, redis_url: str, ledger: Path,
                    name: str = "dramatiq") -> QueueWorker:
    """``dramatiq`` (one process, two threads) on the Redis ``broker``, running
    tests/support/dramatiq_app.py."""
    argv = [sys.executable, "-m", "dramatiq", "tests.support.dramatiq_app", "--processes", "1",
            "--threads", "2"]
    return QueueWorker(tmp, name, argv, queue_env(redis_url, ledger,
                                                  DRAMATIQ_BROKER_URL=broker))


def arq_worker(tmp: Path, venv: Path, broker: str, redis_url: str, ledger: Path,
               name: str = "arq") -> QueueWorker:
    """``arq tests.support.arq_app.WorkerSettings`` on ``broker``, from ``venv`` (arq's
    own, ``.venv-arq``: arq pins a redis-py older than the main venv's)."""
    argv = [str(venv / "bin" / "arq"), "tests.support.arq_app.WorkerSettings"]
    return QueueWorker(tmp, name, argv, queue_env(redis_url, ledger, ARQ_REDIS_URL=broker))


def traceparent_now() -> str | None:
    """The traceparent of the current OpenTelemetry context (a task's, as its guard set
    it from the fire's delivery), or None outside of a trace."""
    from opentelemetry import propagate

    carrier: dict[str, str] = {}
    propagate.inject(carrier)
    return carrier.get("traceparent")


def note_run(**what: object) -> None:
    """A line in the ledger (``CRONSVC_TEST_LEDGER``) for one run of a test task: its
    fire as ``cronsvc.current()`` gives it, and ``what`` the task says."""
    import cronsvc

    ctx = cronsvc.current()
    line = {"fire": ctx and ctx.fire_id, "attempt": ctx and ctx.attempt,
            "payload": ctx and ctx.payload, "pid": os.getpid(), **what}
    with open(os.environ["CRONSVC_TEST_LEDGER"], "a") as f:
        f.write(json.dumps(line) + "\n")
