"""Runtime schedules end to end: a planner and a worker as real processes, schedules
created, changed and deleted from Python while they run, judged by the job's ledger."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from cronsvc.client.client import Client
from cronsvc.fires import parse_fire
from cronsvc.testing import Fleet, read_ledger
from tests.support.wait import wait_for

pytestmark = pytest.mark.slow


@pytest.fixture
def fleet(tmp_path: Path, redis_url: str) -> Iterator[Fleet]:
    f = Fleet(tmp_path, redis_url, {})
    digest = f.call_job("0 0 1 1 *")
    del digest["cron"]  # runs only through runtime schedules (and trigger, at)
    out = tmp_path / "env.txt"
    line = f'echo "$CRONSVC_SCHEDULE $CRONSVC_PAYLOAD" >> {out}'
    f.write({"digest": digest, "mail": {"command": ["sh", "-c", line], "retries": 0}})
    with f.running("worker-1"):
        yield f


def starts(f: Fleet, schedule: str) -> list[dict[str, Any]]:
    return [e for e in read_ledger(f.ledger) if e["event"] == "start"
            and e.get("schedule") == schedule]


def client_of(f: Fleet, r: redis.Redis) -> Client:
    c = f.client()
    wait_for(lambda: "digest" in c.published_jobs(), message="the planner to publish")
    wait_for(lambda: r.zcard(c.keys("digest").workers), message="the worker to start")
    return c


def test_an_upserted_schedule_runs_on_time_with_its_payload_then_changes_and_stops(
        fleet: Fleet, r: redis.Redis, tmp_path: Path) -> None:
    c = client_of(fleet, r)
    c.upsert_schedule("digest:user-42", job="digest", every="1s", payload={"user": 42})
    # Its first fires come from the upsert itself, long before the planner's next look.
    runs = wait_for(lambda: len(starts(fleet, "digest:user-42")) >= 3 and
                    starts(fleet, "digest:user-42"), message="three fires of the schedule")
    for run in runs:
        job, due, _ = parse_fire(run["fire"])
        assert (job, run["payload"], run["attempt"]) == ("digest", {"user": 42}, 1)
        assert due % 1000 == 0 and run["scheduled_ms"] == due
        assert run["at_ms"] >= due  # never early
    assert len({r_["fire"] for r_ in runs}) == len(runs)  # never twice

    # A change: from the moment it returns, no fire of the old definition starts.
    c.upsert_schedule("digest:user-42", job="digest", every="2s", payload={"user": 42, "v": 2})
    changed_at = c.server_ms()
    wait_for(lambda: [e for e in starts(fleet, "digest:user-42") if e["at_ms"] > changed_at
                      and e["payload"].get("v") == 2],
             message="a fire of the new definition")
    late = [e for e in starts(fleet, "digest:user-42")
            if e["at_ms"] > changed_at + 50 and e["payload"].get("v") != 2]
    assert late == []
    assert all(parse_fire(e["fire"])[1] % 2000 == 0 for e in starts(fleet, "digest:user-42")
               if e["payload"].get("v") == 2)

    # A delete: nothing of it starts afterwards.
    assert c.delete_schedule("digest:user-42")
    gone_at = c.server_ms()
    c.upsert_schedule("digest:user-7", job="digest", every="1s", payload={"user": 7})
    wait_for(lambda: len(starts(fleet, "digest:user-7")) >= 2, message="another schedule")
    assert [e for e in starts(fleet, "digest:user-42") if e["at_ms"] > gone_at + 50] == []


def test_a_command_job_gets_the_schedule_id_and_payload(fleet: Fleet, r: redis.Redis,
                                                         tmp_path: Path) -> None:
    c = client_of(fleet, r)
    c.upsert_schedule("mail:weekly/9", job="mail", every="1s", payload=["a", 1])
    out = tmp_path / "env.txt"
    line = wait_for(lambda: out.exists() and out.read_text().splitlines(),
                    message="the command to run")[0]
    assert line == 'mail:weekly/9 ["a", 1]'


def test_a_paused_schedule_does_not_run_and_resumes(fleet: Fleet, r: redis.Redis) -> None:
    c = client_of(fleet, r)
    c.upsert_schedule("p", job="digest", every="1s", paused=True)
    c.upsert_schedule("q", job="digest", every="1s")
    wait_for(lambda: len(starts(fleet, "q")) >= 3, message="the other schedule to run")
    assert starts(fleet, "p") == []
    c.resume_schedule("p")
    wait_for(lambda: starts(fleet, "p"), message="the resumed schedule to run")
