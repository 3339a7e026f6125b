"""``pool: each-host`` with real worker processes standing for three hosts: each host runs
each fire once, with its own fire id and history; a second worker on a host adds no run;
a host that joins gets the next fire."""

from __future__ import annotations

import collections
from pathlib import Path
from typing import Any

import pytest
import redis

from cronsvc.fires import host_fire
from cronsvc.testing import Fleet, history, published, read_ledger
from tests.support.wait import wait_for

pytestmark = pytest.mark.slow


def starts(fleet: Fleet) -> list[dict[str, Any]]:
    return [e for e in read_ledger(fleet.ledger) if e["event"] == "start"]


def test_each_host_runs_each_fire_once_and_a_host_that_joins_gets_the_next(
        tmp_path: Path, redis_url: str, r: redis.Redis) -> None:
    fleet = Fleet(tmp_path, redis_url, {})
    fleet.write({"sweep": fleet.call_job("0 0 1 1 *", pool="each-host")})
    client = published(redis_url, fleet.config)
    try:
        fleet.worker("a-1", "--host", "a")
        fleet.worker("a-2", "--host", "a")  # a second worker on host a
        fleet.worker("b-1", "--host", "b")
        wait_for(lambda: len({e["host"] for e in _infos(r)}) == 2, message="hosts a and b live")
        first = client.trigger("sweep")
        wait_for(lambda: {e["fire"] for e in starts(fleet)} ==
                 {host_fire(first, "a"), host_fire(first, "b")}, message="one run per host")
        fleet.worker("c-1", "--host", "c")
        wait_for(lambda: len({e["host"] for e in _infos(r)}) == 3, message="host c live")
        second = client.trigger("sweep")
        wanted = {host_fire(f, h) for f in (first, second) for h in "ab"} | {
            host_fire(second, "c")}
        wait_for(lambda: {e["fire"] for e in starts(fleet)} >= wanted,
                 message="the next fire on every host, c included")
        # c joined within the window of the first fire, so it may run that one too.
        wait_for(lambda: len([h for h in history(r, "sweep") if h["status"] == "ok"])
                 == len(starts(fleet)), message="every run recorded")
    finally:
        fleet.stop_all()
    runs = collections.Counter(e["fire"] for e in starts(fleet))
    assert all(n == 1 for n in runs.values()) and set(runs) <= wanted | {host_fire(first, "c")}
    by_host = collections.Counter(e["fire"].rsplit("!@", 1)[1] for e in starts(fleet))
    assert by_host["a"] == 2 and by_host["b"] == 2
    assert {e["worker"] for e in starts(fleet) if e["fire"].endswith("!@a")} <= {"a-1", "a-2"}


def _infos(r: redis.Redis) -> list[dict[str, Any]]:
    import json

    from cronsvc.keys import Keys

    return [json.loads(v) for v in r.hgetall(Keys().worker_info).values()]
