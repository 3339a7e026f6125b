"""A worker makes its queue libraries' clients, and a connection to each broker, as it
loads its job file, not at the first fire: importing the library and connecting took
150-250 ms of the first fire's lag on each worker (bench/REPORT.md, dispatch)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import redis

from cronsvc.process.redis_server import RedisServer
from cronsvc.testing import Fleet, history
from tests.support.wait import wait_for

pytestmark = pytest.mark.slow

FAR = "0 0 1 1 *"  # never due in the test


def targets(url: str) -> dict[str, dict[str, Any]]:
    return {
        "celery": {"task": "proj.digest", "broker": url},
        "rq": {"func": "proj.digest", "redis": url},
        "dramatiq": {"actor": "digest", "broker": url},
    }


@pytest.mark.parametrize("kind", ["celery", "rq", "dramatiq"])
def test_a_worker_connects_to_the_broker_before_the_first_fire(
        tmp_path: Path, redis_url: str, fresh_server: Callable[..., RedisServer],
        kind: str) -> None:
    broker = fresh_server()
    watch = redis.Redis.from_url(broker.url, decode_responses=True)
    fleet = Fleet(tmp_path, redis_url, {"digest": {
        "cron": FAR, "timeout": "30s", kind: targets(broker.url)[kind]}})
    try:
        alone = len(watch.client_list())
        with fleet.running("w1", planner=False):
            wait_for(lambda: len(watch.client_list()) > alone, timeout=30,
                     message=f"the worker's connection to the {kind} broker")
    finally:
        watch.close()


def test_a_broker_down_at_start_delays_nothing_else(
        tmp_path: Path, redis_url: str, r: redis.Redis,
        fresh_server: Callable[..., RedisServer]) -> None:
    down = fresh_server()
    down.stop()
    fleet = Fleet(tmp_path, redis_url, {})
    fleet.write({"digest": {"cron": FAR, "timeout": "30s", "rq": targets(down.url)["rq"]},
                 "tick": fleet.call_job("* * * * * *")})
    with fleet.running("w1"):
        wait_for(lambda: any(h["status"] == "ok" for h in history(r, "tick")), timeout=30,
                 message="a fire of the call job, with the RQ job's broker down")
        wait_for(lambda: "digest: not prepared ahead of its first fire" in fleet.log("w1"),
                 timeout=30, message="the worker's word on the job it could not prepare")
