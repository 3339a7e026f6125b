"""A worker in this process against a real Redis: what it does with a claim it holds."""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from cronsvc.client.client import Client
from cronsvc.clock import monotonic
from cronsvc.config.models import Config, load_config
from cronsvc.keys import Keys
from cronsvc.process.logs import setup_logging
from cronsvc.run.outcome import Outcome
from cronsvc.store.connection import connect
from cronsvc.store.scripts import Claim, Scripts
from cronsvc.testing import read_ledger
from cronsvc.worker.worker import Running, Worker
from tests.support.wait import wait_for

K = Keys()


@pytest.fixture
def setup(tmp_path: Path, redis_url: str) -> Iterator[tuple[Config, Client, Path]]:
    marker = tmp_path / "ran"
    cfg = tmp_path / "jobs.yaml"
    cfg.write_text(
        "jobs:\n"
        "  mark:\n"
        "    cron: '0 0 1 1 *'\n"
        f"    command: [touch, {marker}]\n"
    )
    client = Client(redis_url, config=str(cfg))
    client.publish_config()
    yield load_config(cfg), client, marker


def claimed_by_a(config: Config, client: Client, redis_url: str) -> tuple[str, Worker, Claim]:
    """A triggered fire of `mark`, and worker a holding it with a 5 s lease."""
    fid = client.trigger("mark")
    a = Worker(config, connect(redis_url), worker_id="a", lease=5)
    [claim] = a.scripts.claim(K, "a", batch=1, lease_ms=5000).claimed
    return fid, a, claim


def held_long_ago(worker: Worker, config: Config, claim: Claim) -> Running:
    """A claim that waited a long time (Redis away) between its claim and its start."""
    run = Running(claim=claim, job=config.jobs[claim.job], keys=K,
                  claimed_at=monotonic() - 3600)
    worker._running.add(run)
    return run


def run_now(worker: Worker, run: Running) -> None:
    """Run it as the worker's pool would, and record its result as the worker would."""
    worker._run(run)
    worker.results.close()


def test_a_claim_taken_over_before_its_start_is_not_run(
    setup: tuple[Config, Client, Path], redis_url: str, r: redis.Redis
) -> None:
    config, client, marker = setup
    fid, a, first = claimed_by_a(config, client, redis_url)
    # Its lease lapses (the holder could not reach Redis) and worker b takes the fire over.
    r.zadd(K.working, {fid: 0})
    [second] = Scripts(r).claim(K, "b", batch=1, lease_ms=60_000).claimed
    assert (second.fire_id, second.token) == (fid, 2)

    run_now(a, held_long_ago(a, config, first))

    assert not marker.exists()  # a did not run it
    assert not a._running
    assert r.hget(K.attempts, fid) == "2"
    assert json.loads(r.hget(K.claims, fid))["worker"] == "b"  # type: ignore[arg-type]
    assert r.lrange(K.history("mark"), 0, -1) == []


def test_a_claim_still_held_at_its_late_start_runs(
    setup: tuple[Config, Client, Path], redis_url: str, r: redis.Redis
) -> None:
    config, client, marker = setup
    fid, a, claim = claimed_by_a(config, client, redis_url)

    run_now(a, held_long_ago(a, config, claim))

    assert marker.exists()
    [record] = [json.loads(h) for h in r.lrange(K.history("mark"), 0, -1)]
    assert (record["fire"], record["status"], record["attempt"]) == (fid, "ok", 1)
    assert r.zscore(K.working, fid) is None


def test_a_batch_of_results_is_recorded_and_told_in_order_past_a_lease_lost(
    setup: tuple[Config, Client, Path], redis_url: str, r: redis.Redis,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Three successes acked in one call; b took the second over meanwhile: its result is
    # not recorded, and the lines say each fire's end in the order the runs ended.
    config, client, _ = setup
    fids = [client.trigger("mark") for _ in range(3)]
    a = Worker(config, connect(redis_url), worker_id="a", lease=5)
    claims = a.scripts.claim(K, "a", batch=3, lease_ms=5000).claimed
    assert sorted(c.fire_id for c in claims) == sorted(fids)
    r.zadd(K.working, {claims[1].fire_id: 0})
    [taken] = Scripts(r).claim(K, "b", batch=1, lease_ms=60_000).claimed
    assert taken.fire_id == claims[1].fire_id
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    setup_logging("human", "a")
    try:
        for claim in claims:
            run = Running(claim=claim, job=config.jobs["mark"], keys=K)
            a._running.add(run)
            a.results.finished(run, Outcome("ok", int(time.time() * 1000), 3))
        a.results.close()
    finally:
        root.handlers[:] = handlers
        root.setLevel(level)

    lines = capsys.readouterr().err.splitlines()
    told = [(line.split()[2], next(w for w in line.split() if w.startswith("mark@")))
            for line in lines]
    assert told == [("INFO", claims[0].fire_id), ("WARNING", claims[1].fire_id + ":"),
                    ("INFO", claims[2].fire_id)]
    assert "lease taken over (attempt 1)" in lines[1]
    history = [json.loads(h)["fire"] for h in r.lrange(K.history("mark"), 0, -1)]
    assert history == [claims[2].fire_id, claims[0].fire_id]
    assert r.hget(K.attempts, taken.fire_id) == "2" and not a._running


def blocking_file(tmp_path: Path, job: str, more: str = "") -> tuple[Path, Path, Path]:
    """A job file whose ``job`` blocks until released (then ``more`` jobs); the file, the
    ledger its run writes to and the file that releases it."""
    ledger, release = tmp_path / "ledger", tmp_path / "release"
    cfg = tmp_path / "jobs.yaml"
    cfg.write_text(
        f"jobs:\n  {job}:\n    cron: '0 0 1 1 *'\n    call: cronsvc.testing.ledger:block\n"
        f"    args: [{str(ledger)!r}, {str(release)!r}]\n{more}"
    )
    return cfg, ledger, release


def test_a_stopped_worker_gives_back_the_fire_of_a_call_that_ignores_its_cancel(
    tmp_path: Path, redis_url: str, r: redis.Redis
) -> None:
    cfg, ledger, release = blocking_file(tmp_path, "stubborn")
    client = Client(redis_url, config=str(cfg))
    client.publish_config()
    worker = Worker(load_config(cfg), connect(redis_url), worker_id="a", grace=0)
    thread = threading.Thread(target=worker.run_forever, daemon=True)
    thread.start()
    try:
        fid = client.trigger("stubborn")
        wait_for(lambda: read_ledger(ledger), message="the call to start")
        worker.stop()
        worker.stop()  # the second signal: give everything back and go
        wait_for(lambda: not thread.is_alive(), message="the worker to stop")
        # Back in the queue at its due time, its attempt not counted; nothing in flight.
        assert r.zscore(K.queue, fid) is not None
        assert r.zcard(K.working) == 0
        assert r.hget(K.attempts, fid) is None
        assert r.lrange(K.history("stubborn"), 0, -1) == []
    finally:
        release.touch()  # lets the call's thread end


def test_definitions_lost_from_redis_are_written_again_and_fires_claimed(
    setup: tuple[Config, Client, Path], redis_url: str, r: redis.Redis
) -> None:
    config, client, marker = setup
    w = Worker(config, connect(redis_url), worker_id="w", lease=5)
    w.write_held()
    held = K.held(w.held)
    assert r.hgetall(held) == {"mark": config.jobs["mark"].definition}
    fid = client.trigger("mark")
    r.delete(held)  # a Redis restart without persistence, a flush
    assert w.scripts.claim(K, "w", held=held).claimed == []  # not held: left for others
    w._presence()  # notices, and the claim loop writes them again at its next turn
    assert w._held_at < 0
    w.write_held()
    [claim] = w.scripts.claim(K, "w", held=held).claimed
    assert claim.fire_id == fid


def test_a_blocking_call_holds_back_no_other_fire_while_a_slot_is_free(
    tmp_path: Path, redis_url: str, r: redis.Redis
) -> None:
    quick = "  quick:\n    cron: '0 0 1 1 *'\n    call: tests.support.calls:nothing\n"
    cfg, _, release = blocking_file(tmp_path, "stuck", quick)
    client = Client(redis_url, config=str(cfg))
    client.publish_config()
    worker = Worker(load_config(cfg), connect(redis_url), worker_id="a", concurrency=2,
                    grace=0)
    thread = threading.Thread(target=worker.run_forever, daemon=True)
    try:
        # Queued together, the blocking one first: claimed at once, one thread takes it.
        client.trigger("stuck")
        for _ in range(5):
            client.trigger("quick")
        thread.start()
        wait_for(lambda: len(r.lrange(K.history("quick"), 0, -1)) == 5,
                 message="the quick fires recorded while the first blocks")
        assert r.lrange(K.history("stuck"), 0, -1) == []  # still running
    finally:
        release.touch()
        worker.stop()
        worker.stop()
        wait_for(lambda: not thread.is_alive(), message="the worker to stop")
