"""Fires prefetched beyond a worker's slots (``worker.prefetch_multiplier``), by workers in
this process against a real Redis: a worker whose claim ahead filled its free slots takes
the fires due within ``claim_ahead`` that are left, each started at its due time once a
slot is free; one that no slot takes in time goes back to the queue for another worker."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
import yaml

from cronsvc.client.client import Client
from cronsvc.config.models import load_config
from cronsvc.errors import ConfigError
from cronsvc.keys import Keys
from cronsvc.metrics.counters import Metrics
from cronsvc.store.connection import connect
from cronsvc.testing import Fleet, history
from cronsvc.worker import worker as worker_module
from cronsvc.worker.worker import Worker
from tests.support.inproc import in_thread, notes, stopped
from tests.support.wait import server_ms, wait_for

K = Keys()
NOTES = "test:starts"
QUICK = ("q1", "q2", "q3")


def jobs_of(tmp_path: Path, redis_url: str) -> dict[str, Any]:
    """Three quick calls that note their start (server_time), and one that holds its slot
    until the file ``tmp_path/<its fire id>`` exists."""
    never = "0 0 1 1 *"
    jobs: dict[str, Any] = {
        job: {"cron": never, "call": "tests.support.server_time:note",
              "args": [redis_url, NOTES]} for job in QUICK}
    jobs["long"] = {"cron": never, "call": "tests.support.jobs:hold",
                    "args": [str(tmp_path / "ledger"), str(tmp_path)]}
    return jobs


def job_file(tmp_path: Path, redis_url: str) -> Path:
    cfg = tmp_path / "jobs.yaml"
    cfg.write_text(yaml.safe_dump({"jobs": jobs_of(tmp_path, redis_url)}))
    return cfg


@pytest.fixture
def client(tmp_path: Path, redis_url: str) -> Iterator[Client]:
    client = Client(redis_url, config=str(job_file(tmp_path, redis_url)))
    client.publish_config()
    yield client


def started(cfg: Path, redis_url: str, ahead: float, worker_id: str = "w", **kw: Any
            ) -> tuple[Worker, threading.Thread]:
    worker = Worker(load_config(cfg), connect(redis_url), worker_id=worker_id,
                    claim_ahead=ahead, **kw)
    return worker, in_thread(worker)


def ran(r: redis.Redis, jobs: tuple[str, ...]) -> bool:
    return all(history(r, job) for job in jobs)


def enqueued(client: Client, r: redis.Redis, jobs: tuple[str, ...], ms: int
             ) -> dict[str, str]:
    """A fire of each job, all due ``ms`` from now by the server's clock (as the fires of
    one second are)."""
    due = server_ms(r) + ms
    return {job: client.enqueue(job, due) for job in jobs}


def quick_runs(cfg: Path, client: Client, redis_url: str, r: redis.Redis
               ) -> tuple[dict[str, str], dict[str, dict[str, Any]]]:
    """The quick jobs' fires, all due in 2.5 s, run by a worker of one slot that claims
    1 s ahead: their ids by job, and the starts they noted."""
    worker, thread = started(cfg, redis_url, ahead=1.0, concurrency=1)
    try:
        fids = enqueued(client, r, QUICK, 2500)
        wait_for(lambda: ran(r, QUICK), timeout=20, message="the three runs")
    finally:
        stopped(worker, thread)
    return fids, notes(r, NOTES)


def test_a_worker_whose_slot_is_taken_ahead_prefetches_the_rest_and_starts_each_on_time(
    tmp_path: Path, client: Client, redis_url: str, r: redis.Redis,
    monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(worker_module, "PREFETCH_WAIT", 60.0)  # none given back here
    fids, seen = quick_runs(tmp_path / "jobs.yaml", client, redis_url, r)
    for job, fid in fids.items():
        note = seen[fid]
        # One slot, three fires claimed before their due time: two of them prefetched.
        assert note["claimed_at"] < note["due"] <= note["server"], (job, note)
        [record] = history(r, job)
        assert (record["fire"], record["status"], record["attempt"]) == (fid, "ok", 1)
        assert record["started"] >= record["scheduled"] == note["due"]


def test_with_a_multiplier_of_one_the_worker_command_holds_no_more_than_its_slots(
    tmp_path: Path, redis_url: str, r: redis.Redis
) -> None:
    # A `cronsvc worker` process; the file says 4 (the default), its command line 1.
    fleet = Fleet(tmp_path, redis_url, jobs_of(tmp_path, redis_url),
                  worker={"claim_ahead": "1s"})
    client = fleet.client()
    client.publish_config()
    fleet.worker("w", "--concurrency", "1", "--prefetch-multiplier", "1")
    wait_for(lambda: r.hexists(K.worker_info, "w"), timeout=30,
             message=f"the worker to claim\n{fleet.logs()}")
    fids = enqueued(client, r, QUICK, 2500)
    wait_for(lambda: ran(r, QUICK), timeout=20, message=f"the three runs\n{fleet.logs()}")
    fleet.stop_all()
    seen = notes(r, NOTES)
    ahead = [job for job, fid in fids.items() if seen[fid]["claimed_at"] < seen[fid]["due"]]
    assert ahead == ["q1"]  # the one its slot took; the others once due
    assert all(seen[fid]["server"] >= seen[fid]["due"] for fid in fids.values())


def test_a_prefetched_fire_no_slot_takes_in_time_goes_back_to_a_worker_with_one(
    tmp_path: Path, client: Client, redis_url: str, r: redis.Redis,
    caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="cronsvc.worker")
    cfg = tmp_path / "jobs.yaml"
    metrics = Metrics()
    first, thread = started(cfg, redis_url, ahead=1.0, worker_id="first", concurrency=1,
                            metrics=metrics)
    other = None
    try:
        # The long run takes the first worker's one slot ahead; the quick ones are
        # prefetched behind it.
        fids = enqueued(client, r, ("long", *QUICK), 2500)
        wait_for(lambda: r.zcard(K.working) == 4, timeout=20, message="the prefetch")
        # The other worker claims only what is due: it gets the quick fires once given back.
        other, other_thread = started(cfg, redis_url, ahead=0.0, worker_id="other",
                                      concurrency=2)
        wait_for(lambda: ran(r, QUICK), timeout=20,
                 message="the quick runs, on the other worker")
        assert history(r, "long") == []  # still holding the first worker's slot
    finally:
        (tmp_path / fids["long"].replace("/", "_")).touch()
        wait_for(lambda: history(r, "long"), timeout=20, message="the long run")
        stopped(first, thread)
        if other is not None:
            stopped(other, other_thread)
    seen = notes(r, NOTES)
    for job in QUICK:
        fid = fids[job]
        [record] = history(r, job)
        # Given back unstarted, its attempt not counted: one run, by the other worker.
        assert (record["fire"], record["status"], record["attempt"], record["worker"]) == (
            fid, "ok", 1, "other")
        assert seen[fid]["server"] >= seen[fid]["due"]
        assert any(fid in m and "given back" in m for m in caplog.messages), fid
        assert metrics.registry.get_sample_value(
            "cronsvc_prefetch_given_back_total", {"job": job}) == 1
    [record] = history(r, "long")
    assert (record["fire"], record["worker"], record["attempt"]) == (fids["long"], "first", 1)


def test_a_multiplier_below_one_is_refused_with_its_place(tmp_path: Path) -> None:
    cfg = tmp_path / "jobs.yaml"
    cfg.write_text(yaml.safe_dump({"worker": {"prefetch_multiplier": 0},
                                   "jobs": {"a": {"cron": "* * * * *", "command": "true"}}}))
    with pytest.raises(ConfigError, match="worker.prefetch_multiplier"):
        load_config(cfg)
