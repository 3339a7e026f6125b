"""Celery tasks scheduled by cronsvc, with a real ``celery worker`` on a Redis broker: each
fire is one task whose id is the fire id, run once, its outcome in cronsvc's history. A
failing task is retried, dead, told and paused as a ``call`` job is; a dispatcher killed
between its send and its ack sends the same delivery again and the guard runs it once; a
broker down for 10 s delays fires and loses none; a slow task holds its job's slot; a task
killed mid-run is a fire timed out. The checks that need no worker of their own share one
Celery worker, on a broker of their own."""

from __future__ import annotations

import json
import signal
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import redis
from click.testing import CliRunner

from cronsvc.cli.main import main
from cronsvc.keys import Keys
from cronsvc.process.redis_server import RedisServer
from cronsvc.testing import Fleet, WebServer, history, published
from tests.support.browser import shoot
from tests.support.cli import ok
from tests.support.queues import QueueWorker, celery_worker, read_runs
from tests.support.receivers import HttpReceiver, http_receiver
from tests.support.servers import server_binary
from tests.support.wait import server_ms, wait_for, wait_server_past

pytestmark = pytest.mark.slow


def broker_of(redis_url: str) -> str:
    """The Celery broker: database 1 of the test's Redis (cronsvc's keys are on 0)."""
    return redis_url.rsplit("/", 1)[0] + "/1" if redis_url.count("/") > 2 else redis_url + "/1"


@dataclass
class Shared:
    """One Celery worker for the checks that do not stop, kill or cut it off."""

    broker: str
    ledger: Path
    worker: QueueWorker

    def runs(self, job: str) -> list[dict[str, Any]]:
        return [run for run in read_runs(self.ledger) if run["fire"].startswith(f"{job}@")]


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory,
           redis_server: RedisServer) -> Iterator[Shared]:
    tmp = tmp_path_factory.mktemp("celery")
    with RedisServer(tmp / "broker", binary=server_binary()) as broker:
        ledger = tmp / "runs.jsonl"
        with celery_worker(tmp, broker.url, redis_server.url, ledger) as worker:
            yield Shared(broker.url, ledger, worker)


def ended(r: redis.Redis, job: str, fire: str) -> Callable[[], dict[str, Any] | None]:
    """A predicate: the history record of ``fire`` once it has one."""
    return lambda: next((h for h in history(r, job) if h["fire"] == fire), None)


def test_every_second_fires_each_run_once_with_the_fire_id_as_task_id(
        tmp_path: Path, redis_url: str, r: redis.Redis, shared: Shared) -> None:
    fleet = Fleet(tmp_path, redis_url, {"digest": {
        "every": "1s", "timeout": "30s",
        "celery": {"task": "tests.digest", "broker": shared.broker, "args": ["core"],
                   "kwargs": {"size": 3}}}})
    with fleet.running("w1", "w2"):
        extra = published(redis_url, fleet.config).trigger("digest", {"team": "ops"})
        wait_for(lambda: len([h for h in history(r, "digest") if h["status"] == "ok"]) >= 8,
                 timeout=60, message="eight fires of digest recorded ok")
    runs = shared.runs("digest")
    assert len(runs) >= 8 and all(run["team"] == "core" and run["size"] == 3 for run in runs)
    assert max(Counter(run["fire"] for run in runs).values()) == 1
    assert all(run["task_id"] == run["fire"] for run in runs)
    assert [run["payload"] for run in runs if run["fire"] == extra] == [{"team": "ops"}]
    ok = {h["fire"]: h for h in history(r, "digest") if h["status"] == "ok"}
    assert set(ok) <= {run["fire"] for run in runs}
    some = next(iter(ok.values()))
    assert "digest for core" in some["output"] and f"sent {some['fire']}" in some["output"]


def test_the_dashboard_shows_a_celery_job_and_its_runs(
        tmp_path: Path, redis_url: str, r: redis.Redis, shared: Shared, browser: Any) -> None:
    fleet = Fleet(tmp_path, redis_url, {"digest": {
        "cron": "*/10 * * * * *", "timeout": "5m",
        "celery": {"task": "tests.digest", "broker": shared.broker, "args": ["core"]}}})
    with fleet.running("worker-1"), WebServer(tmp_path, redis_url, fleet.config) as web:
        fire = published(redis_url, fleet.config).trigger("digest")
        wait_for(ended(r, "digest", fire), timeout=60, message="a run of digest")
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.goto(f"{web.url}/jobs")
        row = page.locator("table.jobs tbody tr[data-job=digest]").inner_text()
        shoot(page.locator("table.jobs"), tmp_path, "celery-job")
        page.goto(f"{web.url}/jobs/digest")
        shown = page.inner_text("main")
    assert "every 10 seconds" in row and "ok" in row
    assert '"task": "tests.digest"' in shown and fire.split("@")[1] in shown


def test_a_failing_task_is_retried_dead_told_and_paused_as_a_call_job(
        tmp_path: Path, redis_url: str, r: redis.Redis, shared: Shared) -> None:
    with http_receiver() as hooks:
        fleet = Fleet(tmp_path, redis_url, {"broken": {
            "timeout": "30s", "retries": 1, "backoff": "0.1s", "pause_after_failures": 2,
            "notify": ["ops"], "notify_on": ["failed", "dead"],
            "celery": {"task": "tests.broken", "broker": shared.broker, "args": ["ops"]}}},
            notify={"ops": {"webhook": f"{hooks.url}/ops"}},
            notifier={"retry": "50ms", "retry_max": "200ms", "fold": "1h"})
        with fleet.running("w1"):
            client = published(redis_url, fleet.config)
            fire = client.trigger("broken")
            wait_for(lambda: told(hooks) == ["failed", "dead"], timeout=60,
                     message="failed, then dead, told")
            assert not client.job("broken").paused
            again = client.trigger("broken")
            # The second fire's failure and death are folded into the first's (one
            # message a window); the pause is told.
            wait_for(lambda: told(hooks) == ["failed", "dead", "paused"], timeout=60,
                     message="the second fire dead and the job paused, told")
            job = client.job("broken")
    assert job.paused and job.pause_note == "auto: 2 fires failed in a row"
    records = [(h["fire"], h["attempt"], h["status"]) for h in history(r, "broken")]
    assert records == [(f, n, status) for f in (fire, again)
                       for n, status in ((1, "failed"), (2, "failed"), (2, "dead"))]
    assert {h["reason"] for h in history(r, "broken") if h["status"] == "failed"} == {
        "RuntimeError: no digest for ops"}
    assert client.fire_state(fire) == "dead" and client.fire_state(again) == "dead"
    failed, dead, paused = (json.loads(x.body) for x in hooks.received)
    assert (failed["fire"], failed["attempt"], dead["fire"], dead["attempt"]) == (
        fire, 1, fire, 2)
    assert dead["error"] == "RuntimeError: no digest for ops" and paused["job"] == "broken"
    assert [(run["fire"], run["attempt"]) for run in shared.runs("broken")] == [
        (fire, 1), (fire, 2), (again, 1), (again, 2)]


def told(hooks: HttpReceiver) -> list[str]:
    return [json.loads(x.body)["event"] for x in hooks.received]


def test_the_app_form_sends_with_the_users_app_imported_by_the_worker(
        tmp_path: Path, redis_url: str, r: redis.Redis, shared: Shared,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CELERY_BROKER_URL", shared.broker)  # the app's broker, at import
    fleet = Fleet(tmp_path, redis_url, {"digest-app": {
        "timeout": "30s",
        "celery": {"task": "tests.digest", "app": "tests.support.celery_app:app",
                   "args": ["apps"]}}})
    with fleet.running("w1", planner=False):
        fire = fleet.trigger("digest-app")
        record = wait_for(ended(r, "digest-app", fire), timeout=60, message="its outcome")
    assert record["status"] == "ok" and "digest for apps" in record["output"]
    assert [run["team"] for run in shared.runs("digest-app")] == ["apps"]


@pytest.mark.parametrize(("job", "bound", "reason"), [
    ("forbid", {"overlap": "forbid"}, "overlap forbid"),
    ("one-at-once", {"max_concurrent": 1}, "max_concurrent 1 (1 running)")])
def test_a_dispatched_fire_counts_as_running_until_its_outcome_comes_back(
        tmp_path: Path, redis_url: str, r: redis.Redis, shared: Shared, job: str,
        bound: dict[str, Any], reason: str) -> None:
    releases = tmp_path / "releases"
    releases.mkdir()
    fleet = Fleet(tmp_path, redis_url, {job: {
        "timeout": "60s", **bound,
        "celery": {"task": "tests.hold", "broker": shared.broker, "args": [str(releases)]}}})
    with fleet.running("w1", "w2", planner=False):
        client = published(redis_url, fleet.config)
        first = client.trigger(job)
        wait_for(lambda: shared.runs(job), timeout=60, message="the slow task to start")
        second = client.enqueue(job, timedelta(0))  # a trigger would be refused up front
        skipped = wait_for(ended(r, job, second), message="the second fire's record")
        (releases / first).touch()
        done = wait_for(ended(r, job, first), timeout=30, message="the first fire's outcome")
        third = client.trigger(job)
        (releases / third).touch()
        wait_for(ended(r, job, third), timeout=30, message="a fire once the slot is free")
    assert (skipped["status"], skipped["reason"]) == ("skipped", reason)
    assert done["status"] == "ok"
    assert [run["fire"] for run in shared.runs(job) if "ended" in run] == [first, third]


def test_a_dispatcher_killed_between_send_and_ack_resends_the_same_delivery_run_once(
        tmp_path: Path, redis_url: str, r: redis.Redis) -> None:
    broker, ledger = broker_of(redis_url), tmp_path / "runs.jsonl"
    fleet = Fleet(tmp_path, redis_url, {"once": {
        "timeout": "60s",  # no retries: taking over a lapsed lease spends none
        "celery": {"task": "tests.digest", "broker": broker, "args": ["once"]}}})
    queued = redis.Redis.from_url(broker, decode_responses=True)
    try:
        fleet.worker("w1", "--lease", "1")
        fire = fleet.trigger("once")  # no Celery worker yet: the message waits in the broker
        key = Keys().deliveries(fire)
        wait_for(lambda: [f for _, f in r.xrange(key) if f["state"] == "sent"], timeout=30,
                 message="the delivery sent, its outcome awaited")
        fleet.signal("w1", signal.SIGKILL)
        fleet.wait("w1")
        fleet.worker("w2", "--lease", "1")
        wait_for(lambda: len(messages(queued)) == 2, timeout=30,
                 message="the lease lapsed and the delivery sent again")
        assert messages(queued) == [(fire, "1"), (fire, "1")]  # the same delivery twice
        with celery_worker(tmp_path, broker, redis_url, ledger) as worker:
            record = wait_for(lambda: next((h for h in history(r, "once")
                                            if h["status"] == "ok"), None),
                              timeout=60, message="its outcome")
            wait_for(lambda: "skipped, a second delivery" in worker.log(), timeout=30,
                     message="the second copy skipped by the guard")
    finally:
        fleet.stop_all()
        queued.close()
    assert [run["fire"] for run in read_runs(ledger)] == [fire]
    # The killed holder's attempt is recorded lost, as for any job; the fire ran once, ok.
    assert [(h["fire"], h["attempt"], h["status"], h["reason"]) for h in history(r, "once")
            ] == [(fire, 1, "lost", "lease lost: worker w1"), (fire, 2, "ok", None)]
    assert f"resent {fire} (delivery of attempt 1)" in record["output"]
    assert [states for _, states in r.xrange(key)][-1]["state"] == "ok"


def messages(broker: redis.Redis, queue: str = "celery") -> list[tuple[str, str]]:
    """The task id and delivery number of each message waiting in a Celery queue."""
    found = [json.loads(raw)["headers"] for raw in broker.lrange(queue, 0, -1)]
    return [(h["id"], h["cronsvc-attempt"]) for h in found]


def test_a_task_killed_mid_run_is_a_fire_timed_out_and_shown_so(
        tmp_path: Path, redis_url: str, r: redis.Redis) -> None:
    broker, ledger, releases = broker_of(redis_url), tmp_path / "runs.jsonl", tmp_path
    fleet = Fleet(tmp_path, redis_url, {"lost": {
        "timeout": "5s",
        "celery": {"task": "tests.hold", "broker": broker, "args": [str(releases)]}}})
    with celery_worker(tmp_path, broker, redis_url, ledger) as worker, \
            fleet.running("w1", planner=False):
        # Its 5 s run from the send: the task must be taken at once to be killed mid-run.
        wait_for(lambda: " ready." in worker.log(), timeout=60, message="the Celery worker")
        fire = fleet.trigger("lost")
        wait_for(lambda: read_runs(ledger), timeout=60, message="the task to start")
        worker.proc.send_signal(signal.SIGKILL)
        worker.proc.wait()
        record = wait_for(ended(r, "lost", fire), timeout=30, message="the fire's record")
    assert (record["status"], record["reason"]) == (
        "timeout", "sent; no outcome came back within 5s")
    assert [run["fire"] for run in read_runs(ledger)] == [fire]  # started, never ended
    shown = ok(CliRunner().invoke(main, ["show", fire], env={
        "CRONSVC_REDIS_URL": redis_url, "CRONSVC_CONFIG": str(fleet.config)}))
    assert "timeout" in shown and "sent; no outcome came back within 5s" in shown
    assert [f["state"] for _, f in r.xrange(Keys().deliveries(fire))][-2:] == [
        "started", "lost"]


def test_a_broker_down_for_10s_delays_fires_and_loses_none(
        tmp_path: Path, redis_url: str, r: redis.Redis,
        fresh_server: Callable[..., RedisServer]) -> None:
    server, ledger = fresh_server(), tmp_path / "runs.jsonl"
    # Each fire waiting on the broker holds a slot; catch_up all: the fires that found every
    # slot taken wait their turn, rather than only the latest of them running.
    fleet = Fleet(tmp_path, redis_url, {"tick": {
        "every": "1s", "timeout": "60s", "catch_up": "all",
        "celery": {"task": "tests.digest", "broker": server.url, "args": ["tick"]}}})
    with celery_worker(tmp_path, server.url, redis_url, ledger), \
            fleet.running("w1", "w2"):
        wait_for(lambda: len(read_runs(ledger)) >= 2, timeout=60, message="fires before")
        server.stop()
        down_ms = server_ms(r)
        wait_server_past(r, down_ms + 10_000)  # the outage: ten seconds on Redis's clock
        back_ms = server_ms(r)
        server.start()
        due = range(down_ms // 1000 * 1000 + 1000, back_ms, 1000)
        wait_for(lambda: {h["scheduled"] for h in history(r, "tick")} >= set(due),
                 timeout=90, message="every fire due in the outage recorded")
    records = history(r, "tick")
    waited = [h for h in records if down_ms < h["scheduled"] < back_ms]
    assert len(waited) >= 9 and {h["status"] for h in records} == {"ok"}
    ran = Counter(run["fire"] for run in read_runs(ledger))
    assert max(ran.values()) == 1 and {h["fire"] for h in records} <= set(ran)
    planned = sorted(h["scheduled"] for h in records)
    assert all(b - a == 1000 for a, b in zip(planned, planned[1:], strict=False))  # none lost
    for h in waited:  # sent once the broker was back: the lag is in the record
        assert h["started"] + h["duration_ms"] >= back_ms
        assert "accepted by the broker after" in h["output"] or h["started"] >= back_ms
