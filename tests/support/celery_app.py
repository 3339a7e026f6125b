"""A Celery app whose tasks a real ``celery worker`` runs in the tests: each run of a
task is a line in the ledger file it is given (``CRONSVC_TEST_LEDGER``)."""

from __future__ import annotations

import json
import os

from celery import Celery

import cronsvc
from cronsvc.contrib.celery import Guarded

app = Celery("cronsvc_tests", broker=os.environ.get("CELERY_BROKER_URL", "memory://"))
app.conf.update(worker_hijack_root_logger=False, broker_connection_retry_on_startup=True,
                task_ignore_result=True)


def _note(**what: object) -> None:
    ctx = cronsvc.current()
    line = {"fire": ctx and ctx.fire_id, "attempt": ctx and ctx.attempt,
            "payload": ctx and ctx.payload, "pid": os.getpid(), **what}
    with open(os.environ["CRONSVC_TEST_LEDGER"], "a") as f:
        f.write(json.dumps(line) + "\n")


@app.task(base=Guarded, name="tests.digest")
def digest(team: str, size: int = 0) -> str:
    _note(task="digest", team=team, size=size)
    return f"digest for {team}"


@app.task(base=Guarded, name="tests.broken")
def broken(team: str) -> None:
    _note(task="broken", team=team)
    raise RuntimeError(f"no digest for {team}")
