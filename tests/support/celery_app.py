"""A Celery app whose tasks a real ``celery worker`` runs in the tests: each run of a
task is a line in the ledger file it is given (``CRONSVC_TEST_LEDGER``)."""

from __future__ import annotations

import os
import time
from pathlib import Path

from celery import Celery, current_task

import cronsvc
from cronsvc.contrib.celery import Guarded
from tests.support.queues import note_run, traceparent_now

app = Celery("cronsvc_tests", broker=os.environ.get("CELERY_BROKER_URL", "memory://"))
app.conf.update(worker_hijack_root_logger=False, broker_connection_retry_on_startup=True,
                task_ignore_result=True)


def _note(**what: object) -> None:
    note_run(task_id=current_task.request.id, **what)


@app.task(base=Guarded, name="tests.digest")
def digest(team: str, size: int = 0) -> str:
    _note(task="digest", team=team, size=size)
    return f"digest for {team}"


@app.task(base=Guarded, name="tests.broken")
def broken(team: str) -> None:
    _note(task="broken", team=team)
    raise RuntimeError(f"no digest for {team}")


@app.task(base=Guarded, name="tests.hold")
def hold(releases: str) -> str:
    """Note the start, run until the file ``releases/<fire id>`` exists, note the end: a
    slow task the test lets go of (or kills)."""
    _note(task="hold")
    ctx = cronsvc.current()
    release = Path(releases) / (ctx.fire_id if ctx else "unguarded").replace("/", "_")
    deadline = time.monotonic() + 120
    while not release.exists() and time.monotonic() < deadline:
        time.sleep(0.02)  # a task waiting for the test's signal, not a test waiting
    _note(task="hold", ended=True)
    return "held"


@app.task(base=Guarded, name="tests.traced")
def traced() -> str:
    """Note the traceparent the task's message carried and the one it runs under."""
    _note(task="traced", header=getattr(current_task.request, "traceparent", None),
          current=traceparent_now())
    return "traced"
