"""Fleet-wide bounds with real worker processes: a named limit shared by three jobs holds
across two workers, and overlap queue starts the waiting fire once the running one ends."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from cronsvc.testing import Fleet, history, published, read_ledger
from tests.support.wait import wait_for

NOW = timedelta(0)  # a one-off run due now

pytestmark = pytest.mark.slow


def hold_job(fleet: Fleet, releases: Path, **options: Any) -> dict[str, Any]:
    return {"call": "tests.support.jobs:hold",
            "kwargs": {"path": fleet.ledger, "releases": str(releases)}, **options}


def starts(fleet: Fleet) -> list[dict[str, Any]]:
    return [e for e in read_ledger(fleet.ledger) if e["event"] == "start"]


def most_at_once(ledger: list[dict[str, Any]]) -> int:
    """The most runs between their start and end lines at any moment (from the ledger)."""
    now, top = 0, 0
    for e in sorted(ledger, key=lambda e: (e["at_ms"], e["event"] == "start")):
        now += 1 if e["event"] == "start" else -1
        top = max(top, now)
    return top


def test_a_named_limit_holds_across_workers_and_says_why_a_fire_waited(
        tmp_path: Path, redis_url: str, r: Any) -> None:
    releases = tmp_path / "releases"
    releases.mkdir()
    fleet = Fleet(tmp_path, redis_url, {})
    fleet.write({name: hold_job(fleet, releases, tags=["db"]) for name in ("a", "b", "c")},
                limits={"db": 2})
    with fleet.running("w1", "w2", planner=False):
        client = published(redis_url, fleet.config)
        # Queued as one-off runs due now, not triggers: a trigger the limit would skip is
        # refused up front (tests/process/test_trigger_skipped.py); these the claim judges.
        fires = {job: client.enqueue(job, NOW) for job in ("a", "b", "c")}
        wait_for(lambda: len(starts(fleet)) == 2, message="two runs of db jobs")
        skipped = wait_for(lambda: [rec for job in fires for rec in history(r, job)
                                    if rec["status"] == "skipped"], message="one skipped")
        assert [s["reason"] for s in skipped] == ["limit db (2 running)"]
        for fid in fires.values():
            (releases / fid).touch()
        # Recorded, not only ended: the ack is what frees a run's slot of the limit.
        wait_for(lambda: len([rec for job in fires for rec in history(r, job)
                              if rec["status"] == "ok"]) == 2, message="both runs recorded")
        # With a slot free, the next fire of the skipped job runs.
        again = client.trigger(skipped[0]["job"])
        (releases / again).touch()
        wait_for(lambda: len(read_ledger(fleet.ledger)) == 6, message="the next fire ran")
    assert most_at_once(read_ledger(fleet.ledger)) == 2


def test_overlap_queue_starts_the_waiting_fire_when_the_running_one_ends(
        tmp_path: Path, redis_url: str, r: Any) -> None:
    releases = tmp_path / "releases"
    releases.mkdir()
    fleet = Fleet(tmp_path, redis_url, {})
    fleet.write({"sync": hold_job(fleet, releases, overlap="queue")})
    with fleet.running("w1", "w2", planner=False):
        client = published(redis_url, fleet.config)
        first = client.trigger("sync")
        wait_for(lambda: len(starts(fleet)) == 1, message="the first run")
        second = client.enqueue("sync", NOW)  # the claim judges these (not a trigger)
        third = client.enqueue("sync", NOW)
        wait_for(lambda: {rec["status"] for rec in history(r, "sync")} >= {"queued", "skipped"},
                 message="one fire waits, the next is dropped")
        said = {rec["fire"]: rec for rec in history(r, "sync")}
        assert said[second]["reason"] == f"queued behind {first}"
        assert said[third]["reason"] == f"overlap queue: {second} waits already"
        assert client.fire_state(second) == "queued"
        (releases / first).touch()
        wait_for(lambda: [e["fire"] for e in starts(fleet)] == [first, second],
                 message="the waiting fire starts")
        (releases / second).touch()
        wait_for(lambda: len(read_ledger(fleet.ledger)) == 4, message="it ended")
    ledger = read_ledger(fleet.ledger)
    end_first = next(e["at_ms"] for e in ledger if e["event"] == "end" and e["fire"] == first)
    start_second = next(e["at_ms"] for e in ledger
                        if e["event"] == "start" and e["fire"] == second)
    assert start_second >= end_first and most_at_once(ledger) == 1


def test_max_concurrent_lets_n_runs_of_a_job_start_across_workers(
        tmp_path: Path, redis_url: str, r: Any) -> None:
    releases = tmp_path / "releases"
    releases.mkdir()
    fleet = Fleet(tmp_path, redis_url, {})
    fleet.write({"report": hold_job(fleet, releases, max_concurrent=2)})
    with fleet.running("w1", "w2", planner=False):
        client = published(redis_url, fleet.config)
        fires = [client.enqueue("report", NOW) for _ in range(3)]  # judged by the claim
        wait_for(lambda: len(starts(fleet)) == 2, message="two runs")
        skipped = wait_for(lambda: [h for h in history(r, "report") if h["status"] == "skipped"],
                           message="the third skipped")
        assert [h["reason"] for h in skipped] == ["max_concurrent 2 (2 running)"]
        for fid in fires:
            (releases / fid).touch()
        wait_for(lambda: len(read_ledger(fleet.ledger)) == 4, message="both ended")
    assert most_at_once(read_ledger(fleet.ledger)) == 2
    assert {e["worker"] for e in starts(fleet)} <= {"w1", "w2"}
