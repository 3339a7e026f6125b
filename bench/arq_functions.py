"""The arq functions `bench/dispatch.py` enqueues, run by a real ``arq`` worker (from
``.venv-arq``) on ``ARQ_REDIS_URL``, each wrapped by :func:`cronsvc.contrib.arq.guarded`:
a job cronsvc sent runs once and reports back; one of arq's own ``enqueue_job`` loop
runs as it is. ``stamp`` notes when it started (:func:`bench.stamps.note`).

arq's worker looks at its queue every ``poll_delay`` (0.5 s by default): 10 ms here,
for the plain loop's jobs and cronsvc's alike, so that the lag measured is not arq's
polling."""

from __future__ import annotations

import os
import time
from typing import Any

from arq.connections import RedisSettings

from bench.stamps import note
from cronsvc.contrib.arq import guarded, job_deserializer, job_serializer


@guarded
async def noop(ctx: dict[str, Any], *args: Any, **kwargs: Any) -> None:
    """Nothing: what is measured is the path of the job."""


@guarded
async def stamp(ctx: dict[str, Any], *args: Any, **kwargs: Any) -> None:
    note(time.time(), ctx["job_id"])


class WorkerSettings:
    functions = [noop, stamp]
    redis_settings = RedisSettings.from_dsn(os.environ.get("ARQ_REDIS_URL", "redis://"))
    job_serializer = job_serializer
    job_deserializer = job_deserializer
    max_tries = 1
    poll_delay = 0.01
    max_jobs = 10
