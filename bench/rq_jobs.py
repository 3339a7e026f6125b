"""The RQ functions `bench/dispatch.py` enqueues, run by a real ``rq worker`` whose job
class is :class:`cronsvc.contrib.rq.GuardedJob` (JSON serializer): a job cronsvc sent
runs once and reports back; a job of RQ's own enqueue loop runs as it is.
``stamp`` notes when it started (:func:`bench.stamps.note`)."""

from __future__ import annotations

import time
from typing import Any

from rq import get_current_job

from bench.stamps import note


def noop(*args: Any, **kwargs: Any) -> None:
    """Nothing: what is measured is the path of the job."""


def stamp(*args: Any, **kwargs: Any) -> None:
    started = time.time()
    job = get_current_job()
    note(started, job and job.id)
