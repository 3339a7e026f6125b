"""arq functions a real ``arq`` worker runs in the tests (from ``.venv-arq``): each run
of a function is a line in the ledger file it is given (``CRONSVC_TEST_LEDGER``)."""

from __future__ import annotations

import os
from typing import Any

from arq.connections import RedisSettings

from cronsvc.contrib.arq import guarded, job_deserializer, job_serializer
from tests.support.queues import note_run, traceparent_now


@guarded
async def digest(ctx: dict[str, Any], team: str, size: int = 0) -> str:
    note_run(task="digest", job_id=ctx["job_id"], team=team, size=size)
    return f"digest for {team}"


@guarded
async def broken(ctx: dict[str, Any], team: str) -> None:
    note_run(task="broken", job_id=ctx["job_id"], team=team)
    raise RuntimeError(f"no digest for {team}")


@guarded
async def traced(ctx: dict[str, Any]) -> str:
    """Note the traceparent it runs under (the guard's, from the fire's delivery)."""
    note_run(task="traced", job_id=ctx["job_id"], current=traceparent_now())
    return "traced"


class WorkerSettings:
    functions = [digest, broken, traced]
    redis_settings = RedisSettings.from_dsn(os.environ.get("ARQ_REDIS_URL", "redis://"))
    job_serializer = job_serializer
    job_deserializer = job_deserializer
    max_tries = 1  # cronsvc's retries, not arq's, try a failed fire again
    poll_delay = 0.1
