"""The Celery side of the dispatch scenario: a guarded task that writes the chaos ledger,
and a note of every copy of a message the workers took, run or skipped.

``celery -A tests.chaos.celery_tasks worker`` runs it (the app is
tests/support/celery_app.py's, on ``CELERY_BROKER_URL``). The task notes its start and
its finish as a `call` job of the chaos fleet does (tests/chaos/jobs.py), so the judge
reads one ledger whatever ran the fire. Each copy a worker took is one line of
``<ledger>.copies`` once the guard has decided: a copy it skipped is a resend (or a
broker's redelivery) that did no harm.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

from celery.signals import task_postrun

import cronsvc
from cronsvc.contrib.celery import Guarded, delivery_of
from cronsvc.contrib.guard import Skipped
from tests.chaos.jobs import append, duration
from tests.support.celery_app import app

__all__ = ["app", "work"]


def copies_path(ledger: str) -> str:
    """Where the copies of the messages the workers took are noted, beside the ledger."""
    return f"{ledger}.copies"


@app.task(base=Guarded, name="chaos.work")
def work(longest_ms: int = 300) -> None:
    """A start line, up to ``longest_ms`` of work (as long for every copy of a fire), an
    end line."""
    ctx = cronsvc.current()
    assert ctx is not None, "chaos.work runs only as a fire's delivery"
    note = (ctx.fire_id, ctx.attempt, ctx.worker, "v1", "celery", ctx.payload)
    path = os.environ["CRONSVC_TEST_LEDGER"]
    append(path, "start", *note)
    time.sleep(duration(ctx.fire_id, longest_ms))
    append(path, "end", *note)


@task_postrun.connect
def _copy(task_id: str | None = None, task: Any = None, retval: Any = None,
          state: str | None = None, **_: Any) -> None:
    """One line per copy a worker took: its fire, delivery, and whether the guard ran it
    (``state`` FAILURE with no start line: the guard could not reach cronsvc's Redis)."""
    delivery = delivery_of(task.request) if task is not None else None
    line = json.dumps({
        "task_id": task_id, "fire": delivery and delivery.fire_id,
        "attempt": delivery and delivery.attempt, "skipped": isinstance(retval, Skipped),
        "state": state, "pid": os.getpid(), "at_ms": time.time_ns() // 1_000_000,
        **({"error": f"{type(retval).__name__}: {retval}"}
           if isinstance(retval, BaseException) else {}),
    })
    fd = os.open(copies_path(os.environ["CRONSVC_TEST_LEDGER"]),
                 os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (line + "\n").encode())
    finally:
        os.close(fd)
