"""A Celery app whose tasks a real ``celery worker`` runs in the tests: each run of a
task is a line in the ledger file it is given (``CRONSVC_TEST_LEDGER``)."""

from __future__ import annotations

import os

from celery import Celery

from cronsvc.contrib.celery import Guarded
from tests.support.queues import note_run

app = Celery("cronsvc_tests", broker=os.environ.get("CELERY_BROKER_URL", "memory://"))
app.conf.update(worker_hijack_root_logger=False, broker_connection_retry_on_startup=True,
                task_ignore_result=True)


@app.task(base=Guarded, name="tests.digest")
def digest(team: str, size: int = 0) -> str:
    note_run(task="digest", team=team, size=size)
    return f"digest for {team}"


@app.task(base=Guarded, name="tests.broken")
def broken(team: str) -> None:
    note_run(task="broken", team=team)
    raise RuntimeError(f"no digest for {team}")
