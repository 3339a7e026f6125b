"""The Celery tasks `bench/dispatch.py` sends, run by a real ``celery worker``
(``celery -A bench.celery_tasks worker``, broker ``CELERY_BROKER_URL``).

Both are guarded (:class:`cronsvc.contrib.celery.Guarded`): a message cronsvc sent runs
once and reports its outcome; a message of Celery's own enqueue loop carries no delivery
and runs as it is. ``bench.stamp`` notes when it started (``time.time()``, its first
act) and its fire id (or task id) in ``CRONSVC_TEST_LEDGER``: the lag to its start.
"""

from __future__ import annotations

import os
import time
from typing import Any

from celery import Celery

from bench.stamps import note
from cronsvc.contrib.celery import Guarded

app = Celery("cronsvc_bench", broker=os.environ.get("CELERY_BROKER_URL", "memory://"))
app.conf.update(worker_hijack_root_logger=False, broker_connection_retry_on_startup=True,
                task_ignore_result=True)


@app.task(base=Guarded, name="bench.noop")
def noop(*args: Any, **kwargs: Any) -> None:
    """Nothing: what is measured is the path of the message."""


@app.task(base=Guarded, bind=True, name="bench.stamp")
def stamp(self: Any, *args: Any, **kwargs: Any) -> None:
    note(time.time(), self.request.id)
