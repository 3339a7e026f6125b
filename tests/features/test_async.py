"""Async ``call`` jobs in real worker processes: awaited on the worker's event loop and
recorded with what they returned; stopped by their timeout, a lost lease or a replacing
fire, their ``finally`` run; 200 of them at once in one worker, its slots still free; and
what calls print and log kept in their own run's output, apart from each other and out
of the worker's log."""

from __future__ import annotations

import json
import signal
from pathlib import Path
from typing import Any

import pytest
import redis

from cronsvc.keys import Keys
from cronsvc.testing import Fleet, history, published, read_ledger
from tests.support.wait import wait_for

pytestmark = pytest.mark.slow

S = "tests.support.async_calls"
K = Keys()
NEVER = "0 0 1 1 *"


def a_job(fleet: Fleet, call: str, **options: Any) -> dict[str, Any]:
    kwargs = {"path": fleet.ledger, **options.pop("kwargs", {})}
    return {"cron": NEVER, "call": f"{S}:{call}", "kwargs": kwargs, **options}


def held_fleet(tmp_path: Path, redis_url: str, job: str, **options: Any) -> Fleet:
    """A fleet whose one job ``job`` awaits ``tmp_path/<fire id>`` (:func:`held`)."""
    fleet = Fleet(tmp_path, redis_url, {})
    fleet.write({job: a_job(fleet, "held", kwargs={"releases": str(tmp_path)}, **options)})
    return fleet


def events(fleet: Fleet, fire: str) -> list[tuple[int, str]]:
    return [(e["attempt"], e["event"]) for e in read_ledger(fleet.ledger) if e["fire"] == fire]


def ended(r: redis.Redis, job: str, n: int = 1) -> list[dict[str, Any]]:
    return wait_for(lambda: len(h := history(r, job)) >= n and h, timeout=40,
                    message=f"{n} run(s) of {job} recorded")


def test_an_async_job_runs_and_is_recorded_with_what_it_returned(
        tmp_path: Path, redis_url: str, r: redis.Redis) -> None:
    fleet = Fleet(tmp_path, redis_url, {})
    fleet.write({"hello": a_job(fleet, "returns")})
    with fleet.running("w1", planner=False):
        fid = fleet.trigger("hello")
        [run] = ended(r, "hello")
    assert (run["status"], run["output"]) == ("ok", f"{{'fire': '{fid}', 'current': True}}")
    assert "never awaited" not in fleet.log("w1")


def test_a_timeout_cancels_an_async_job_and_its_finally_runs(
        tmp_path: Path, redis_url: str, r: redis.Redis) -> None:
    fleet = held_fleet(tmp_path, redis_url, "slow", timeout="1s")
    with fleet.running("w1", planner=False):
        fid = fleet.trigger("slow")
        run, dead = ended(r, "slow", 2)  # out of attempts: a dead line follows
    assert (run["status"], run["reason"], dead["status"]) == (
        "timeout", "timed out after 1s", "dead")
    assert events(fleet, fid) == [(1, "start"), (1, "cancelled"), (1, "finally")]


def test_a_replacing_fire_cancels_the_running_async_one(
        tmp_path: Path, redis_url: str, r: redis.Redis) -> None:
    fleet = held_fleet(tmp_path, redis_url, "one", overlap="replace")
    with fleet.running("w1", planner=False):
        first = fleet.trigger("one")
        wait_for(lambda: events(fleet, first) == [(1, "start")], message="the first to run")
        second = fleet.client().trigger("one")
        wait_for(lambda: events(fleet, first)[-1:] == [(1, "finally")],
                 message="the first cancelled")
        (tmp_path / second).touch()
        runs = ended(r, "one", 2)
    assert events(fleet, first) == [(1, "start"), (1, "cancelled"), (1, "finally")]
    assert sorted(h["status"] for h in runs) == ["ok", "replaced"]


def test_a_lost_lease_cancels_an_async_job_and_its_finally_runs(  # type: ignore[no-untyped-def]
        tmp_path: Path, fresh_server) -> None:
    server = fresh_server()
    r = redis.Redis.from_url(server.url, decode_responses=True)
    fleet = held_fleet(tmp_path, server.url, "held")
    try:
        fleet.worker("w1", "--lease", "3")
        fid = fleet.trigger("held")
        wait_for(lambda: events(fleet, fid) == [(1, "start")], message="attempt 1 to start")
        # A frozen Redis: the worker cannot renew the lease, and its fence stops the run.
        assert server.proc is not None
        server.proc.send_signal(signal.SIGSTOP)
        try:
            wait_for(lambda: (1, "finally") in events(fleet, fid), timeout=30,
                     message="the run to be cancelled")
            assert "lease not renewed" in fleet.log("w1"), fleet.logs()
        finally:
            server.proc.send_signal(signal.SIGCONT)
        (tmp_path / fid).touch()  # attempt 2, once the lease lapsed, ends at once
        # The lapsed attempt's line and the retry's are written by the worker's results
        # thread, a note and an ack, in either order.
        runs = wait_for(lambda: len(found := sorted((h["attempt"], h["status"])
                                                    for h in history(r, "held"))) >= 2
                        and any(s == "ok" for _, s in found) and found, timeout=40,
                        message="the fire to run again after the lease, both attempts recorded")
    finally:
        fleet.stop_all()
    assert events(fleet, fid)[:3] == [(1, "start"), (1, "cancelled"), (1, "finally")]
    assert runs == [(1, "lost"), (2, "ok")], runs


def test_one_worker_process_awaits_200_async_fires_at_once_and_keeps_its_slots(
        tmp_path: Path, redis_url: str, r: redis.Redis) -> None:
    fleet = Fleet(tmp_path, redis_url, {})
    release = tmp_path / "release"
    fleet.write({"crowd": a_job(fleet, "crowd", kwargs={"release": str(release)}),
                 "sync": {"cron": NEVER, "call": "cronsvc.testing.ledger:record",
                          "kwargs": {"path": fleet.ledger}}},
                worker={"async_concurrency": 200, "history": 300})
    with fleet.running("w1", planner=False):
        client = published(redis_url, fleet.config)
        for _ in range(200):
            client.trigger("crowd")
        inside = wait_for(lambda: len(s := [e for e in read_ledger(fleet.ledger)
                                            if e["job"] == "crowd"]) == 200 and s,
                          timeout=60, message="200 async runs waiting at once")
        # All 200 wait on the loop, none in a slot thread: a sync job still gets one.
        fid = client.trigger("sync")
        wait_for(lambda: events(fleet, fid) == [(1, "start")], message="the sync job to run")
        assert {e["event"] for e in inside} == {"start"}
        assert len({e["pid"] for e in inside}) == 1
        # The worker tells the fleet of them beside its slots (the dashboard's fleet page).
        wait_for(lambda: json.loads(r.hget(K.worker_info, "w1") or "{}").get("awaiting") == 200,
                 message="the worker's presence to count 200 async runs")
        release.touch()
        runs = ended(r, "crowd", 200)
    assert {h["status"] for h in runs} == {"ok"}
    assert len([e for e in read_ledger(fleet.ledger) if e["event"] == "end"]) == 200


def test_print_and_logging_are_kept_per_run_and_concurrent_calls_do_not_mix(
        tmp_path: Path, redis_url: str, r: redis.Redis) -> None:
    fleet = Fleet(tmp_path, redis_url, {})
    release = tmp_path / "release"
    jobs = {tag: a_job(fleet, call, kwargs={"tag": tag, "release": str(release)})
            for tag, call in (("a", "chatty"), ("b", "chatty"),
                              ("c", "chatty_sync"), ("d", "chatty_sync"))}
    fleet.write(jobs)
    with fleet.running("w1", planner=False):
        client = published(redis_url, fleet.config)
        for tag in jobs:
            client.trigger(tag)
        wait_for(lambda: len(read_ledger(fleet.ledger)) == 4, message="all four waiting")
        release.touch()
        outputs = {tag: ended(r, tag)[0]["output"] for tag in jobs}
    for tag, output in outputs.items():
        assert set(output.splitlines()) == {
            f"{tag}: printed", f"{tag}: to stderr", f"WARNING tests.jobs: {tag}: logged",
            f"rows tag={tag} n=42", f"{tag}: after the wait", repr(tag)}, output
    log = fleet.log("w1")
    assert "printed" not in log and "logged" not in log and "rows" not in log, log


def test_a_shutdown_cancels_an_async_job_past_the_grace_and_gives_its_fire_back(
        tmp_path: Path, redis_url: str, r: redis.Redis) -> None:
    fleet = held_fleet(tmp_path, redis_url, "held")
    fleet.worker("w1", "--grace", "1")
    try:
        fid = fleet.trigger("held")
        wait_for(lambda: events(fleet, fid) == [(1, "start")], message="the run to start")
        fleet.signal("w1")
        assert fleet.wait("w1") == 0, fleet.log("w1")
    finally:
        fleet.stop_all()
    assert events(fleet, fid) == [(1, "start"), (1, "cancelled"), (1, "finally")]
    assert r.zscore(K.queue, fid) is not None  # given back, to run again
    assert history(r, "held") == []
