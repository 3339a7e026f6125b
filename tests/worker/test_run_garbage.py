"""What a run leaves behind once its result is recorded: nothing that only the cycle
collector would free (each such run costs the worker a share of full collections), and a
worker process's collector set for many short fires."""

from __future__ import annotations

import gc
import json
import weakref
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from cronsvc.client.client import Client
from cronsvc.clock import monotonic
from cronsvc.config.models import load_config
from cronsvc.keys import Keys
from cronsvc.store.connection import connect
from cronsvc.worker import heap
from cronsvc.worker.worker import Running, Worker
from tests.support.wait import wait_for

K = Keys()
NEVER = "0 0 1 1 *"
JOBS = {
    "sync": "call: tests.support.calls:nothing",
    "async": "call: tests.support.async_calls:returns",
    "command": "command: ['true']",
}


@pytest.fixture
def no_collector() -> Iterator[None]:
    """Only reference counting frees objects meanwhile."""
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


@pytest.mark.parametrize("kind", list(JOBS))
def test_a_recorded_run_is_freed_by_reference_counting(
        kind: str, tmp_path: Path, redis_url: str, r: redis.Redis, no_collector: None) -> None:
    cfg = tmp_path / "jobs.yaml"
    cfg.write_text(f"jobs:\n  job:\n    cron: '{NEVER}'\n    {JOBS[kind]}\n")
    client = Client(redis_url, config=str(cfg))
    client.publish_config()
    client.trigger("job")
    worker = Worker(load_config(cfg), connect(redis_url), worker_id="w", lease=30)
    [claim] = worker.scripts.claim(K, "w", batch=1, lease_ms=30_000).claimed
    worker.results.start()

    # As the claim loop starts a run (Worker._start), keeping only a weak reference.
    run = Running(claim=claim, job=worker.config.jobs["job"], keys=K,
                  claimed_at=monotonic(), renewed_at=monotonic())
    run.on_loop = worker._runs_async(run.job)
    worker._running.add(run)
    if run.on_loop:
        worker._launch(run)
    else:
        worker._run(run)
    ref = weakref.ref(run)
    del run
    wait_for(lambda: not worker._running, timeout=10, message="the run recorded")
    worker.results.close()

    assert [json.loads(line)["status"] for line in r.lrange(K.history("job"), 0, -1)] == ["ok"]
    assert ref() is None


def test_settle_keeps_what_is_loaded_out_of_collections() -> None:
    threshold = gc.get_threshold()
    try:
        heap.settle()
        assert gc.get_freeze_count() > 0
        assert gc.get_threshold() == (heap.YOUNG, *threshold[1:])
    finally:
        gc.unfreeze()
        gc.set_threshold(*threshold)
