"""Fires claimed ahead of their due time (``worker.claim_ahead``) by a worker in this
process, against a real Redis: each starts at its due time by the server's clock, never
before; a stop while one waits for it runs it (first signal) or gives it back (second)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import redis
import yaml

from cronsvc.client.client import Client
from cronsvc.config.models import load_config
from cronsvc.keys import Keys
from cronsvc.store.connection import connect
from cronsvc.testing import history
from cronsvc.worker.worker import Worker
from tests.support import inproc, server_time
from tests.support.inproc import in_thread, stopped
from tests.support.wait import wait_for

K = Keys()
NOTES = "test:starts"


def job_file(tmp_path: Path, redis_url: str) -> Path:
    """A sync call, an async call and a command, each noting its start (server_time)."""
    never = "0 0 1 1 *"
    args = [redis_url, NOTES]
    jobs = {
        "sync": {"cron": never, "call": "tests.support.server_time:note", "args": args},
        "async": {"cron": never, "call": "tests.support.server_time:note_async",
                  "args": args},
        "cmd": {"cron": never, "command": server_time.command(*args)},
    }
    cfg = tmp_path / "jobs.yaml"
    cfg.write_text(yaml.safe_dump({"jobs": jobs}))
    return cfg


@pytest.fixture
def fleet(tmp_path: Path, redis_url: str) -> Iterator[tuple[Path, Client]]:
    cfg = job_file(tmp_path, redis_url)
    client = Client(redis_url, config=str(cfg))
    client.publish_config()
    yield cfg, client


def started(cfg: Path, redis_url: str, ahead: float, **kw: Any
            ) -> tuple[Worker, threading.Thread]:
    worker = Worker(load_config(cfg), connect(redis_url), worker_id="w", claim_ahead=ahead,
                    **kw)
    return worker, in_thread(worker)


def notes(r: redis.Redis) -> dict[str, dict[str, Any]]:
    return inproc.notes(r, NOTES)


def records(r: redis.Redis, job: str) -> list[dict[str, Any]]:
    return history(r, job)


def test_fires_claimed_ahead_start_at_their_due_time_never_before(
    fleet: tuple[Path, Client], redis_url: str, r: redis.Redis
) -> None:
    cfg, client = fleet
    worker, thread = started(cfg, redis_url, ahead=0.4)
    try:
        # Due 0.6 s on (the worker is told at once): claimed 0.4 s before, then held.
        fids = {job: client.enqueue(job, timedelta(milliseconds=600 + 10 * i))
                for i, job in enumerate(("sync", "async", "cmd"))}
        wait_for(lambda: len(records(r, "sync") + records(r, "async") + records(r, "cmd")) == 3,
                 timeout=20, message="the three runs")
    finally:
        stopped(worker, thread)
    seen = notes(r)
    for job, fid in fids.items():
        note = seen[fid]
        assert note["claimed_at"] < note["due"], (job, note)  # claimed ahead
        assert note["server"] >= note["due"], (job, note)  # started at its due time
        [record] = records(r, job)
        assert (record["fire"], record["status"]) == (fid, "ok")
        assert record["started"] >= record["scheduled"] == note["due"]


@pytest.mark.parametrize("job", ["sync", "async", "cmd"])
def test_a_hard_stop_gives_back_a_fire_claimed_ahead_that_waits(
    fleet: tuple[Path, Client], redis_url: str, r: redis.Redis, job: str
) -> None:
    cfg, client = fleet
    worker, thread = started(cfg, redis_url, ahead=1.0, grace=0)
    fid = client.enqueue(job, timedelta(milliseconds=900))
    due = int(fid.split("@")[1].split("#")[0])
    wait_for(lambda: r.zscore(K.working, fid) is not None, message="the claim ahead")
    stopped(worker, thread)  # before its due time: the run never started
    assert r.zscore(K.queue, fid) == due  # back at its due time, its attempt not counted
    assert r.zcard(K.working) == 0 and r.hget(K.attempts, fid) is None
    assert records(r, job) == [] and fid not in notes(r)
    # Another worker runs it, once.
    other, thread = started(cfg, redis_url, ahead=0.0)
    try:
        wait_for(lambda: records(r, job), timeout=20, message="its run")
    finally:
        stopped(other, thread)
    [record] = records(r, job)
    assert (record["fire"], record["status"], record["attempt"]) == (fid, "ok", 1)
    assert notes(r)[fid]["server"] >= due


def test_a_first_stop_lets_a_fire_claimed_ahead_run_at_its_due_time(
    fleet: tuple[Path, Client], redis_url: str, r: redis.Redis
) -> None:
    cfg, client = fleet
    worker, thread = started(cfg, redis_url, ahead=1.0)
    fid = client.enqueue("sync", timedelta(milliseconds=900))
    wait_for(lambda: r.zscore(K.working, fid) is not None, message="the claim ahead")
    stopped(worker, thread, hard=False)  # the grace period: it runs, then the worker stops
    [record] = records(r, "sync")
    assert (record["fire"], record["status"], record["attempt"]) == (fid, "ok", 1)
    note = notes(r)[fid]
    assert note["claimed_at"] < note["due"] <= note["server"]
    assert r.zcard(K.queue) == 0 and r.zcard(K.working) == 0
