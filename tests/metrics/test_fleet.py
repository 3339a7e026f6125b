"""The fleet's state as Prometheus gauges (cronsvc.metrics.fleet): what a planner exports,
scraped over HTTP on a real Redis; and the fire times around now it reports per job."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
import redis

from cronsvc.client.client import Client
from cronsvc.clock import dt_to_ms
from cronsvc.fires import fire_id, new_tag, parse_fire
from cronsvc.keys import Keys, keys_for
from cronsvc.metrics.counters import Metrics
from cronsvc.metrics.fleet import fire_times
from cronsvc.planner.planner import Planner
from cronsvc.schedule.expand import Spec
from cronsvc.store.connection import connect
from cronsvc.store.scripts import Scripts
from tests.support.metrics import scrape, value
from tests.support.wait import server_ms

K = Keys()


# -- the planner: fleet state --------------------------------------------------------
FLEET_JOBS = """
jobs:
  yearly: {cron: "0 0 1 1 *", command: ["true"]}
  monthly: {cron: "0 0 1 * *", command: ["true"]}
"""


def test_planner_exports_the_fleet_state(
    tmp_path: Path, redis_url: str, r: redis.Redis, metrics: Metrics
) -> None:
    cfg = tmp_path / "schedules.yaml"
    cfg.write_text(FLEET_JOBS)
    planner = Planner(cfg, connect(redis_url), metrics=metrics)
    stats = planner.tick()
    client = Client(redis_url, config=str(cfg))
    scripts = Scripts(r)
    now = server_ms(r)
    # Four one-offs due in the past (queued by hand: the Client takes no past time); a
    # ghost worker claims the three oldest.
    fids = [fire_id("yearly", now - ago, new_tag("at"))
            for ago in (600_000, 500_000, 400_000, 300_000)]
    for fid in fids:
        scripts.enqueue(K, fid, parse_fire(fid)[1])
    claimed = scripts.claim(K, "ghost", batch=3, lease_ms=600_000).claimed
    assert [c.fire_id for c in claimed] == fids[:3]
    dead, ok, _running = claimed
    scripts.fail(K, dead.fire_id, dead.token, "yearly", {"status": "failed"}, 100, 1, 0)
    finished = {"fire": ok.fire_id, "job": "yearly", "status": "ok", "started": now - 9000,
                "duration_ms": 1500}
    scripts.ack(K, ok.fire_id, ok.token, "yearly", finished)
    # A newer failure on top: the last success is found below the history's head.
    scripts.record(K, "yearly", {"fire": "yearly@1", "job": "yearly", "status": "failed",
                                 "started": now - 1000, "duration_ms": 5})
    client.pause("monthly")
    client.upsert_schedules([{"id": f"y{i}", "job": job, "cron": "0 0 1 1 *"}
                             for i, job in enumerate(("yearly", "yearly", "monthly"))])
    r.zadd(K.workers, {"w-live": now, "w-gone": now - 600_000})
    r.hset(K.worker_info, mapping={"w-live": json.dumps({"busy": 1, "slots": 4}),
                                   "w-gone": json.dumps({"busy": 3, "slots": 8})})

    assert metrics.port
    s = scrape(metrics.port)
    assert value(s, "cronsvc_redis_up") == 1
    assert value(s, "cronsvc_queue_depth", shard="0", pool="default") == r.zcard(K.queue)
    assert value(s, "cronsvc_pool_due", pool="default") is not None
    assert value(s, "cronsvc_runtime_schedules", job="yearly") == 2
    assert value(s, "cronsvc_runtime_schedules", job="monthly") == 1
    assert value(s, "cronsvc_in_flight") == 1
    assert value(s, "cronsvc_dead_letters") == 1
    assert value(s, "cronsvc_due_now") == 1  # the newest one-off, unless the 1st of a month
    lateness = value(s, "cronsvc_oldest_due_lateness_seconds")
    assert lateness is not None and 300 <= lateness < 400
    assert value(s, "cronsvc_workers_live") == 1
    assert value(s, "cronsvc_fleet_busy_slots") == 1
    assert value(s, "cronsvc_fleet_slots") == 4
    assert value(s, "cronsvc_job_last_success_timestamp_seconds", job="yearly") == (
        now - 9000 + 1500) / 1000
    assert value(s, "cronsvc_job_last_success_timestamp_seconds", job="monthly") is None
    assert value(s, "cronsvc_job_paused", job="monthly") == 1
    assert value(s, "cronsvc_job_paused", job="yearly") is None
    year = datetime.fromtimestamp(now / 1000, UTC).year
    jan1 = [dt_to_ms(datetime(y, 1, 1, tzinfo=UTC)) / 1000 for y in (year - 1, year, year + 1)]
    assert [value(s, f"cronsvc_job_{w}_fire_timestamp_seconds", job="yearly")
            for w in ("previous", "last", "next")] == jan1
    assert value(s, "cronsvc_planner_ticks_total") == 1
    assert value(s, "cronsvc_planner_fires_planned_total") == stats.added
    assert value(s, "cronsvc_planner_last_tick_timestamp_seconds")
    assert value(s, "cronsvc_worker_slots") is None  # a planner has no slots

    cfg.write_text(FLEET_JOBS.replace('  monthly: {cron: "0 0 1 * *", command: ["true"]}\n', ""))
    assert planner.reload(force=True)
    after = scrape(metrics.port)
    assert not [key for key in after if ("job", "monthly") in key[1]
                and key[0].startswith("cronsvc_job_") and key[0] != "cronsvc_job_paused"]
    assert value(after, "cronsvc_job_next_fire_timestamp_seconds", job="yearly") == jan1[2]


def test_the_last_success_counts_runs_kept_on_other_shards(
    tmp_path: Path, redis_url: str, r: redis.Redis, metrics: Metrics
) -> None:
    cfg = tmp_path / "schedules.yaml"
    cfg.write_text("redis: {shards: 3}\n" + FLEET_JOBS)
    Planner(cfg, connect(redis_url), metrics=metrics).tick()
    now = server_ms(r)
    home = keys_for("yearly", 3)
    other = next(Keys(shard=k) for k in range(3) if k != home.shard)
    # The job's own fires failed lately; a runtime schedule's run on another shard is ok.
    Scripts(r).record(home, "yearly", {"fire": "yearly@1", "job": "yearly",
                                       "status": "failed", "started": now - 1000})
    Scripts(r).record(other, "yearly", {"fire": "yearly@2!y1", "job": "yearly",
                                        "status": "ok", "started": now - 5000,
                                        "duration_ms": 200})
    s = scrape(metrics.port)
    assert value(s, "cronsvc_job_last_success_timestamp_seconds", job="yearly") == (
        now - 4800) / 1000


def test_a_scrape_without_redis_says_so(tmp_path: Path, fresh_server, metrics: Metrics) -> None:  # type: ignore[no-untyped-def]
    server = fresh_server()
    cfg = tmp_path / "schedules.yaml"
    cfg.write_text(FLEET_JOBS)
    Planner(cfg, connect(server.url, timeout=2.0), metrics=metrics).tick()
    assert metrics.port
    assert value(scrape(metrics.port), "cronsvc_redis_up") == 1
    server.kill()
    s = scrape(metrics.port)
    assert value(s, "cronsvc_redis_up") == 0
    assert value(s, "cronsvc_planner_ticks_total") == 1  # the process's own series stay


# -- fire times around now ------------------------------------------------------------
def ms(year: int, month: int, day: int, hour: int = 0, minute: int = 0, second: int = 0,
       tz: str = "UTC") -> int:
    from zoneinfo import ZoneInfo

    return dt_to_ms(datetime(year, month, day, hour, minute, second, tzinfo=ZoneInfo(tz)))


NOW = ms(2030, 3, 15, 12, 0, 30)


@pytest.mark.parametrize(("cron", "tz", "expected"), [
    ("*/15 * * * *", "UTC",
     (ms(2030, 3, 15, 11, 45), ms(2030, 3, 15, 12), ms(2030, 3, 15, 12, 15))),
    ("* * * * * *", "UTC", (NOW - 1000, NOW, NOW + 1000)),
    ("0 0 1 1 *", "UTC", (ms(2029, 1, 1), ms(2030, 1, 1), ms(2031, 1, 1))),
    ("0 9 * * 1-5", "Europe/Berlin",  # Friday 15 March 2030: Thursday, Friday, Monday
     (ms(2030, 3, 14, 9, tz="Europe/Berlin"), ms(2030, 3, 15, 9, tz="Europe/Berlin"),
      ms(2030, 3, 18, 9, tz="Europe/Berlin"))),
    ("0 0 29 2 *", "UTC", (ms(2024, 2, 29), ms(2028, 2, 29), ms(2032, 2, 29))),
])
def test_fire_times_around_now(cron: str, tz: str, expected: tuple[int, int, int]) -> None:
    times = fire_times(Spec(cron, tz, "j"), NOW)
    assert (times.previous, times.last, times.next) == expected
