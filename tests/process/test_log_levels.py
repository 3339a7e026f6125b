"""What a worker logs as a WARNING needs a look; the normal course of things is INFO: a
fire skipped while its job is paused, one queued behind a running fire (``overlap:
queue``), new definitions written after a start or an edit. Definitions that Redis lost
(a flush, a restart without persistence) are still a warning."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import redis

from cronsvc.testing import BLOCK, Fleet
from tests.support.wait import wait_for

pytestmark = pytest.mark.slow

GONE = "the definitions this worker holds are gone from Redis"


def lines(fleet: Fleet, pattern: str) -> list[str]:
    return re.findall(rf"^.*{pattern}.*$", fleet.log("w1"), re.MULTILINE)


def test_normal_events_are_info_and_lost_definitions_a_warning(
        tmp_path: Path, redis_url: str) -> None:
    jobs = {"tick": {"every": "1s", "command": ["true"]},
            "slow": {"every": "1s", "call": BLOCK, "overlap": "queue",
                     "kwargs": {"path": str(tmp_path / "ledger.jsonl")}}}
    fleet = Fleet(tmp_path, redis_url, jobs)
    r = redis.Redis.from_url(redis_url, decode_responses=True)
    with fleet.running("w1"):
        queued = wait_for(lambda: lines(fleet, r"queued slow@"), timeout=40,
                          message="a fire of slow queued behind the running one")
        fleet.client().pause("tick")
        skipped = wait_for(lambda: lines(fleet, r"skipped tick@\S+ \(paused\)"), timeout=40,
                           message="a fire of the paused job skipped")
        assert all(" INFO " in line for line in queued + skipped), queued + skipped
        # An edit: new definitions, written at once, are not "gone".
        (worker,) = r.zrange("cron:workers", 0, -1)

        def held() -> str:
            return str(json.loads(r.hget("cron:worker-info", worker) or "{}").get("held"))

        before = held()
        fleet.write({**jobs, "added": {"cron": "0 3 * * *", "command": ["true"]}})
        wait_for(lambda: held() != before and r.exists(f"cron:held:{held()}"), timeout=40,
                 message="the edit's definitions written")
        seen = r.zscore("cron:workers", worker) or 0
        wait_for(lambda: (r.zscore("cron:workers", worker) or 0) > seen,
                 message="a presence after the new definitions")
        assert GONE not in fleet.log("w1")  # neither at the start nor after the edit
        # Lost: a warning, and they are written again.
        r.delete(*r.keys("cron:held:*"))
        (warned,) = wait_for(lambda: lines(fleet, GONE), message="the loss said")
        assert " WARNING " in warned
        wait_for(lambda: r.keys("cron:held:*"), message="the definitions written again")
        (tmp_path / "ledger.jsonl.release").touch()


def test_fires_missed_in_bulk_are_said_in_one_line(tmp_path: Path, redis_url: str) -> None:
    fleet = Fleet(tmp_path, redis_url, {"tick": {"every": "1s", "command": ["true"],
                                                 "starting_deadline": "1s"}})
    r = redis.Redis.from_url(redis_url, decode_responses=True)

    def overdue() -> int:  # fires of tick past their starting deadline, on Redis's clock
        seconds, micros = r.time()
        return int(r.zcount("cron:queue", 0, seconds * 1000 + micros // 1000 - 2000))

    with fleet.running():  # a planner, no worker yet: the fleet was away
        wait_for(lambda: overdue() >= 5, timeout=40, message="five fires of tick overdue")
        fleet.worker("w1")
        (said,) = wait_for(lambda: lines(fleet, r"missed \d+ fires of tick"), timeout=40,
                           message="the missed fires said at once")
    assert re.search(r" WARNING missed \d+ fires of tick, due \S+Z to \S+Z$", said), said
    assert not lines(fleet, r"missed tick@"), "each fire named besides"
