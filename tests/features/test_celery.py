"""Celery tasks scheduled by cronsvc, with a real ``celery worker`` on a Redis broker: each
fire is one task whose id is the fire id, run once, its outcome in cronsvc's history."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
import redis

from cronsvc.testing import Fleet, history
from tests.support.queues import celery_worker, read_runs
from tests.support.wait import wait_for

pytestmark = pytest.mark.slow


def broker_of(redis_url: str) -> str:
    """The Celery broker: database 1 of the test's Redis (cronsvc's keys are on 0)."""
    return redis_url.rsplit("/", 1)[0] + "/1" if redis_url.count("/") > 2 else redis_url + "/1"


def test_every_second_fires_each_run_once_with_the_fire_id_as_task_id(
        tmp_path: Path, redis_url: str, r: redis.Redis) -> None:
    broker, ledger = broker_of(redis_url), tmp_path / "runs.jsonl"
    fleet = Fleet(tmp_path, redis_url, {"digest": {
        "every": "1s", "timeout": "30s",
        "celery": {"task": "tests.digest", "broker": broker, "args": ["core"],
                   "kwargs": {"size": 3}}}})
    with celery_worker(tmp_path, broker, redis_url, ledger), fleet.running("w1", "w2"):
        wait_for(lambda: len([h for h in history(r, "digest") if h["status"] == "ok"]) >= 5,
                 timeout=60, message="five fires of digest recorded ok")
    runs = read_runs(ledger)
    assert runs and all(run["team"] == "core" and run["size"] == 3 for run in runs)
    assert all(run["fire"].startswith("digest@") for run in runs)
    assert max(Counter(run["fire"] for run in runs).values()) == 1
    ok = {h["fire"]: h for h in history(r, "digest") if h["status"] == "ok"}
    assert set(ok) <= {run["fire"] for run in runs}
    some = next(iter(ok.values()))
    assert "digest for core" in some["output"] and f"sent {some['fire']}" in some["output"]


def test_a_failing_task_is_recorded_failed_with_its_error(
        tmp_path: Path, redis_url: str, r: redis.Redis) -> None:
    broker, ledger = broker_of(redis_url), tmp_path / "runs.jsonl"
    fleet = Fleet(tmp_path, redis_url, {"broken": {
        "cron": "0 0 1 1 *", "timeout": "30s",
        "celery": {"task": "tests.broken", "broker": broker, "args": ["ops"]}}})
    with celery_worker(tmp_path, broker, redis_url, ledger), fleet.running("w1", planner=False):
        fire = fleet.trigger("broken")
        record = wait_for(lambda: next((h for h in history(r, "broken")
                                        if h["fire"] == fire and h["status"] == "failed"), None),
                          timeout=60, message="the failed run recorded")
    assert record["reason"] == "RuntimeError: no digest for ops"
    assert [run["fire"] for run in read_runs(ledger)] == [fire]
