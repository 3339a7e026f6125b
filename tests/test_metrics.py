"""Prometheus metrics, scraped over HTTP from a worker and a planner on a real Redis."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import urllib.request
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import click
import pytest
import redis
from click.testing import CliRunner

from cronsvc.cli.options import metrics_port_option
from cronsvc.client.client import Client
from cronsvc.clock import dt_to_ms
from cronsvc.config.models import load_config
from cronsvc.keys import Keys
from cronsvc.metrics.counters import Metrics, start_metrics
from cronsvc.metrics.fleet import fire_times
from cronsvc.planner.planner import Planner
from cronsvc.planner.publish import PublishedSpec
from cronsvc.store.connection import connect
from cronsvc.store.scripts import Scripts
from cronsvc.worker.worker import Worker
from tests.conftest import ROOT, wait_for

K = Keys()
Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def scrape(port: int) -> Samples:
    from prometheus_client.parser import text_string_to_metric_families

    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as resp:
        text = resp.read().decode()
    return {(s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def value(samples: Samples, name: str, **labels: str) -> float | None:
    return samples.get((name, frozenset(labels.items())))


@pytest.fixture
def metrics() -> Iterator[Metrics]:
    m = Metrics()
    m.serve(0, "127.0.0.1")
    yield m
    m.close()


def server_ms(r: redis.Redis) -> int:
    sec, usec = r.time()
    return int(sec) * 1000 + int(usec) // 1000


def wait_server_past(r: redis.Redis, ms: int) -> None:
    wait_for(lambda: server_ms(r) > ms, message=f"the Redis clock to pass {ms}")


# -- a worker ------------------------------------------------------------------------
def worker_config(tmp: Path) -> Path:
    never = '"0 0 1 1 *"'
    ledger, release = tmp / "ledger.jsonl", tmp / "release"
    path = tmp / "schedules.yaml"
    path.write_text(f"""
worker: {{concurrency: 2}}
jobs:
  quick: {{cron: {never}, call: "tests.jobfuncs:nothing"}}
  broken: {{cron: {never}, call: "tests.jobfuncs:boom"}}
  again: {{cron: {never}, call: "tests.jobfuncs:nothing", retries: 5}}
  stale: {{cron: {never}, call: "tests.jobfuncs:nothing"}}
  latest: {{cron: {never}, call: "tests.jobfuncs:nothing"}}
  sleepy: {{cron: {never}, call: "tests.jobfuncs:nothing"}}
  held:
    cron: {never}
    call: "tests.e2e_jobs:block"
    kwargs: {{path: "{ledger}", release: "{release}"}}
""")
    return path


def plan_due_now(r: redis.Redis, cfg: Path, job: str, n: int) -> None:
    """Queue ``n`` cron fires of ``job``, all already due when queued."""
    mark = int(r.hget(K.watermarks, job))  # type: ignore[arg-type]
    dues = [mark + i for i in range(1, n + 1)]
    wait_server_past(r, dues[-1])
    digest = load_config(cfg).jobs[job].digest
    Scripts(r).plan(K, [(job, digest, dues[-1], dues)])


def test_worker_counts_runs_drops_reclaims_dead_lag_and_busy_slots(
    tmp_path: Path, redis_url: str, r: redis.Redis, metrics: Metrics
) -> None:
    cfg = worker_config(tmp_path)
    client = Client(redis_url, config=str(cfg))
    client.publish_config()
    # Workers that vanished held these two three times: `stale` has no attempt left
    # (retries plus two lost leases), `again` has retries to spare.
    client.trigger("again")
    client.trigger("stale")
    for _ in range(3):
        ghost = Scripts(r).claim(K, "ghost", batch=10, lease_ms=1)
        assert sorted(c.job for c in ghost.claimed) == ["again", "stale"]
        wait_server_past(r, ghost.now_ms + 1)  # the ghost's lease expires
    client.trigger("quick")
    client.trigger("broken")
    plan_due_now(r, cfg, "latest", 2)  # the older fire is skipped (catch_up latest)
    client.pause("sleepy")
    plan_due_now(r, cfg, "sleepy", 1)  # a cron fire of a paused job is skipped

    worker = Worker(load_config(cfg), connect(redis_url), metrics=metrics, worker_id="w1")
    thread = threading.Thread(target=worker.run_forever, daemon=True)
    thread.start()
    try:
        port = metrics.port
        assert port
        runs = "cronsvc_runs_total"
        done = wait_for(lambda: (s := scrape(port)) and value(s, runs, job="latest", status="ok")
                        and value(s, runs, job="again", status="ok")
                        and value(s, runs, job="broken", status="failed")
                        and value(s, runs, job="quick", status="ok")
                        and value(s, "cronsvc_dead_total", job="stale") and s,
                        message="every triggered fire to be counted")
        assert value(done, runs, job="quick", status="ok") == 1
        assert value(done, "cronsvc_dead_total", job="broken") == 1  # failed, no retry left
        assert value(done, "cronsvc_dead_total", job="stale") == 1  # reclaimed past its attempts
        assert value(done, "cronsvc_reclaimed_total", job="again") == 1
        assert value(done, "cronsvc_reclaimed_total", job="quick") is None
        dropped = "cronsvc_fires_dropped_total"
        assert value(done, dropped, job="latest", status="skipped", reason="catch_up latest") == 1
        assert value(done, dropped, job="sleepy", status="skipped", reason="paused") == 1
        # First attempts only: quick, broken and latest, not the reclaimed `again`.
        assert value(done, "cronsvc_fire_lag_seconds_count", kind="call") == 3
        assert value(done, "cronsvc_fire_lag_seconds_bucket", kind="call", le="+Inf") == 3
        assert value(done, "cronsvc_worker_slots") == 2
        assert not [key for key in done if key[0].startswith("cronsvc_planner_")]

        client.trigger("held")
        wait_for(lambda: value(scrape(port), "cronsvc_worker_busy_slots") == 1,
                 message="the held run to occupy a slot")
        (tmp_path / "release").touch()
        wait_for(lambda: value(scrape(port), "cronsvc_worker_busy_slots") == 0,
                 message="the slot to be free again")
        assert value(scrape(port), runs, job="held", status="ok") == 1
    finally:
        (tmp_path / "release").touch()
        worker.stop()
        thread.join(30)
    assert not thread.is_alive()


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
    # Four one-offs due in the past; a ghost worker claims the three oldest.
    fids = [client.enqueue("yearly", now - ago) for ago in (600_000, 500_000, 400_000, 300_000)]
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
    r.zadd(K.workers, {"w-live": now, "w-gone": now - 600_000})
    r.hset(K.worker_info, mapping={"w-live": json.dumps({"busy": 1, "slots": 4}),
                                   "w-gone": json.dumps({"busy": 3, "slots": 8})})

    assert metrics.port
    s = scrape(metrics.port)
    assert value(s, "cronsvc_redis_up") == 1
    assert value(s, "cronsvc_queue_depth", shard="0") == r.zcard(K.queue)
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


# -- pieces --------------------------------------------------------------------------
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
    times = fire_times(PublishedSpec("j", cron, tz), NOW)
    assert (times.previous, times.last, times.next) == expected


def test_each_metrics_object_counts_on_its_own() -> None:
    a, b = Metrics(), Metrics()
    a.reclaimed("x")
    a.reclaimed("x")
    b.dead("x")
    assert a.registry.get_sample_value("cronsvc_reclaimed_total", {"job": "x"}) == 2
    assert b.registry.get_sample_value("cronsvc_reclaimed_total", {"job": "x"}) is None
    assert a.registry.get_sample_value("cronsvc_dead_total", {"job": "x"}) is None


def test_metrics_port_option_serves_and_no_port_serves_nothing() -> None:
    served: list[Metrics | None] = []

    @click.command()
    @metrics_port_option
    def cmd(metrics_port: int | None) -> None:
        served.append(start_metrics(metrics_port, "127.0.0.1"))

    assert CliRunner().invoke(cmd, []).exit_code == 0
    assert served == [None]
    result = CliRunner().invoke(cmd, ["--metrics-port", "0"])
    assert result.exit_code == 0, result.output
    m = served[-1]
    assert m is not None and m.port
    try:
        m.reclaimed("x")
        assert value(scrape(m.port), "cronsvc_reclaimed_total", job="x") == 1
    finally:
        m.close()
    assert CliRunner().invoke(cmd, ["--metrics-port", "70000"]).exit_code == 2


def test_processes_without_a_metrics_port_do_not_load_prometheus() -> None:
    # Planners and workers import cronsvc.metrics.counters, so that module must load light.
    code = ("import sys, cronsvc.metrics.counters; assert 'redis' not in sys.modules; "
            "import cronsvc.worker.worker, cronsvc.planner.planner, cronsvc.cli.main; "
            "assert 'prometheus_client' not in sys.modules")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
