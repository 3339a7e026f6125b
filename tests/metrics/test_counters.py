"""The counters of a process (cronsvc.metrics.counters): a worker's runs, drops, reclaims,
lag and slots scraped over HTTP on a real Redis; one registry per Metrics; the option
that serves them; and processes that never load prometheus_client."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

import click
import redis
from click.testing import CliRunner

from cronsvc.cli.options import metrics_port_option
from cronsvc.client.client import Client
from cronsvc.config.models import load_config
from cronsvc.keys import Keys
from cronsvc.metrics.counters import Metrics, start_metrics
from cronsvc.store.connection import connect
from cronsvc.store.scripts import Scripts
from cronsvc.worker.worker import Worker
from tests.support.metrics import scrape, value
from tests.support.paths import ROOT
from tests.support.wait import wait_for, wait_server_past

K = Keys()


# -- a worker ------------------------------------------------------------------------
def worker_config(tmp: Path) -> Path:
    never = '"0 0 1 1 *"'
    ledger, release = tmp / "ledger.jsonl", tmp / "release"
    path = tmp / "schedules.yaml"
    path.write_text(f"""
worker: {{concurrency: 2}}
jobs:
  quick: {{cron: {never}, call: "tests.support.calls:nothing"}}
  broken: {{cron: {never}, call: "tests.support.calls:boom"}}
  again: {{cron: {never}, call: "tests.support.calls:nothing", retries: 5}}
  stale: {{cron: {never}, call: "tests.support.calls:nothing"}}
  latest: {{cron: {never}, call: "tests.support.calls:nothing"}}
  sleepy: {{cron: {never}, call: "tests.support.calls:nothing"}}
  held:
    cron: {never}
    call: "cronsvc.testing.ledger:block"
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


# -- pieces --------------------------------------------------------------------------
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
