"""arq functions scheduled by cronsvc, with a real ``arq`` worker: each fire is one arq job
whose id is the fire id, run once, its outcome in cronsvc's history.

arq pins redis-py below 6, so arq's worker and the cronsvc processes that send into it run
from ``.venv-arq`` (``make install-arq``); this test reads cronsvc's Redis from the main
venv, as every test does.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import redis
import yaml

from cronsvc.clock import SYSTEM
from cronsvc.keys import Keys
from tests.support.otlp import otlp_receiver
from tests.support.parts import missing
from tests.support.paths import ROOT
from tests.support.queues import QueueWorker, arq_worker, read_runs
from tests.support.receivers import HttpReceiver, http_receiver
from tests.support.wait import wait_for

pytestmark = pytest.mark.slow

ARQ_VENV = ROOT / ".venv-arq"


@pytest.fixture
def venv() -> Path:
    if not (ARQ_VENV / "bin" / "arq").exists():
        missing(f"{ARQ_VENV} is missing: `make install-arq` builds it (arq pins redis-py < 6)")
    return ARQ_VENV


class ArqFleet:
    """cronsvc planner and workers run by ``.venv-arq``'s python, on one job file."""

    def __init__(self, tmp: Path, venv: Path, redis_url: str, jobs: dict[str, Any],
                 **top: Any) -> None:
        self.tmp, self.python, self.redis_url = tmp, venv / "bin" / "python", redis_url
        self.config = tmp / "schedules.yaml"
        self.config.write_text(yaml.safe_dump({"jobs": jobs, **top}, sort_keys=False))
        self.procs: dict[str, QueueWorker] = {}

    def start(self, role: str, name: str, *args: str) -> None:
        argv = [str(self.python), "-m", "cronsvc", role, "--config", str(self.config),
                "--redis-url", self.redis_url, "--name", name, *args]
        self.procs[name] = QueueWorker(self.tmp, name, argv,
                                       dict(os.environ, PYTHONPATH=str(ROOT)))

    def trigger(self, job: str, payload: Any = None) -> str:
        """Publish the file and run ``job`` once now (from this venv); its fire id."""
        from cronsvc.client.client import Client

        client = Client(self.redis_url, config=str(self.config))
        client.publish_config()
        return str(client.trigger(job, payload))

    def kill(self, name: str) -> None:
        self.procs[name].proc.kill()
        self.procs[name].proc.wait()

    @contextmanager
    def running(self, *workers: str, planner: bool = True) -> Iterator[ArqFleet]:
        if planner:
            self.start("planner", "planner", "--tick", "1")
        for name in workers:
            self.start("worker", name, "--lease", "3s", "--processes", "1")
        try:
            yield self
        finally:
            for proc in self.procs.values():
                proc.stop()


def history(r: redis.Redis, job: str) -> list[dict[str, Any]]:
    return [json.loads(x) for x in reversed(r.lrange(Keys().history(job), 0, -1))]


def records(r: redis.Redis, job: str, status: str = "ok") -> dict[str, dict[str, Any]]:
    return {h["fire"]: h for h in history(r, job) if h["status"] == status}


def broker_of(redis_url: str) -> str:
    """arq's Redis: database 1 of the test's Redis (cronsvc's keys are on 0)."""
    return redis_url.rsplit("/", 1)[0] + "/1"


def target(broker: str, function: str = "digest", **more: Any) -> dict[str, Any]:
    return {"function": function, "redis": broker, "queue": "arq:queue", **more}


def due_ms(fire: str) -> int:
    return int(fire.split("@")[1].split("~")[0].split("#")[0])


def test_every_second_fires_each_run_once_with_the_fire_id_as_job_id(
        tmp_path: Path, venv: Path, redis_url: str, r: redis.Redis) -> None:
    broker, ledger = broker_of(redis_url), tmp_path / "runs.jsonl"
    fleet = ArqFleet(tmp_path, venv, redis_url, {"digest": {
        "every": "1s", "timeout": "30s",
        "arq": target(broker, args=["core"], kwargs={"size": 3})}})
    with arq_worker(tmp_path, venv, broker, redis_url, ledger), fleet.running("w1", "w2"):
        wait_for(lambda: len(records(r, "digest")) >= 8, timeout=90,
                 message="eight fires of digest recorded ok")
    runs = read_runs(ledger)
    assert all(run["team"] == "core" and run["size"] == 3 for run in runs)
    assert all(run["job_id"] == run["fire"] and run["fire"].startswith("digest@")
               for run in runs)
    assert max(Counter(run["fire"] for run in runs).values()) == 1
    dues = sorted(due_ms(run["fire"]) for run in runs)
    assert {b - a for a, b in zip(dues, dues[1:], strict=False)} == {1000}  # none missing
    ok = records(r, "digest")
    assert set(ok) <= {run["fire"] for run in runs}
    assert {h["status"] for h in history(r, "digest")} == {"ok"}
    some = next(iter(ok.values()))
    assert f"sent {some['fire']} (delivery of attempt 1): arq job {some['fire']} queued on " \
           "arq:queue" in some["output"]
    assert "'digest for core'" in some["output"]


def test_a_failing_function_is_retried_dead_told_and_pauses_the_job(
        tmp_path: Path, venv: Path, redis_url: str, r: redis.Redis) -> None:
    broker, ledger = broker_of(redis_url), tmp_path / "runs.jsonl"
    with http_receiver() as hooks:
        fleet = ArqFleet(tmp_path, venv, redis_url, {"broken": {
            "cron": "0 0 1 1 *", "timeout": "30s", "retries": 1, "backoff": "1s",
            "pause_after_failures": 1, "notify": ["ops"],
            "arq": target(broker, "broken", args=["ops"])}},
            notify={"ops": {"webhook": f"{hooks.url}/ops"}},
            notifier={"retry": "50ms", "retry_max": "200ms", "fold": "1h"})
        with arq_worker(tmp_path, venv, broker, redis_url, ledger), fleet.running("w1"):
            fire = fleet.trigger("broken")
            wait_for(lambda: {"dead", "paused"} <= set(events(hooks)), timeout=60,
                     message="the death and the pause told")
    tries = [h for h in history(r, "broken") if h["fire"] == fire]
    assert [(h["status"], h["attempt"]) for h in tries] == [
        ("failed", 1), ("failed", 2), ("dead", 2)]
    assert [h["reason"] for h in tries[:2]] == ["RuntimeError: no digest for ops"] * 2
    assert r.zscore(Keys().dead, fire) is not None, tries[2]
    assert json.loads(r.hget(Keys().paused, "broken") or "{}")["note"] == \
        "auto: 1 fires failed in a row"
    # A retry is a new delivery: arq keeps the failed run's id, so it has one of its own.
    assert [(run["job_id"], run["attempt"]) for run in read_runs(ledger)] == [
        (fire, 1), (f"{fire}~2", 2)]


def events(hooks: HttpReceiver) -> list[str]:
    return [json.loads(got.body)["event"] for got in hooks.received]


def test_a_dispatcher_killed_after_its_send_is_followed_by_the_same_job_run_once(
        tmp_path: Path, venv: Path, redis_url: str, r: redis.Redis,
        fresh_server: Callable[..., Any]) -> None:
    broker, ledger = fresh_server().url, tmp_path / "runs.jsonl"
    arq_redis = redis.Redis.from_url(broker)
    fleet = ArqFleet(tmp_path, venv, redis_url, {"once": {
        "cron": "0 0 1 1 *", "timeout": "60s", "arq": target(broker, args=["k9"])}})
    with fleet.running("w1", planner=False):
        fire = fleet.trigger("once", {"run": "k9"})
        # No arq worker yet: the job waits in arq's queue while w1 waits for its outcome.
        wait_for(lambda: arq_redis.zscore("arq:queue", fire) is not None,
                 message="the job in arq's queue")
        fleet.kill("w1")
        fleet.start("worker", "w2", "--lease", "3s", "--processes", "1")
        # Each enqueue_job WATCHes the job's key (nothing else on this server does, before
        # an arq worker runs): the second is w2 sending the same job again.
        wait_for(lambda: watches(arq_redis) == 2, timeout=60, message="w2 sent it again")
        with arq_worker(tmp_path, venv, broker, redis_url, ledger):
            record = wait_for(lambda: records(r, "once").get(fire), timeout=60,
                              message="the fire recorded ok")
    assert [(run["job_id"], run["payload"]) for run in read_runs(ledger)] == [
        (fire, {"run": "k9"})]
    assert record["worker"] == "w2" and record["attempt"] == 2
    assert f"resent {fire} (delivery of attempt 1): arq job {fire} already taken by the " \
           "queue" in record["output"]


def watches(client: redis.Redis) -> int:
    return int(client.info("commandstats").get("cmdstat_watch", {}).get("calls", 0))


def test_fires_wait_while_the_broker_is_down_and_each_goes_out_once_after(
        tmp_path: Path, venv: Path, redis_url: str, r: redis.Redis,
        fresh_server: Callable[..., Any]) -> None:
    server, ledger = fresh_server(), tmp_path / "runs.jsonl"
    broker = server.url
    fleet = ArqFleet(tmp_path, venv, redis_url, {"digest": {
        "every": "1s", "timeout": "60s", "arq": target(broker, args=["down"])}},
        worker={"concurrency": 8})
    with fleet.running("w1"):
        with arq_worker(tmp_path, venv, broker, redis_url, ledger):
            wait_for(lambda: len(records(r, "digest")) >= 2, timeout=60,
                     message="two fires ok before the broker goes down")
        server.stop()
        waiting = wait_for(lambda: sending(r, "digest") if len(sending(r, "digest")) >= 3
                           else None, timeout=60, message="three fires waiting to be sent")
        back_ms = SYSTEM.now_ms()
        server.start()
        with arq_worker(tmp_path, venv, broker, redis_url, ledger, name="arq2"):
            wait_for(lambda: set(waiting) <= set(records(r, "digest")), timeout=60,
                     message="the fires that waited recorded ok")
    runs = read_runs(ledger)
    assert max(Counter(run["fire"] for run in runs).values()) == 1
    dues = sorted(due_ms(run["fire"]) for run in runs)
    assert {b - a for a, b in zip(dues, dues[1:], strict=False)} == {1000}  # none lost
    ok = records(r, "digest")
    for fire in waiting:
        late = int(ok[fire]["output"].split(" ms after its time")[0].rsplit(" ", 1)[1])
        assert late >= back_ms - due_ms(fire), ok[fire]["output"]  # sent once it was back


def sending(r: redis.Redis, job: str) -> list[str]:
    """The fires of ``job`` whose delivery is still being sent (the broker refuses)."""
    prefix = Keys().deliveries("")
    fires = []
    for key in r.scan_iter(f"{prefix}{job}@*"):
        last = r.xrevrange(key, count=1)
        if last and last[0][1].get("state") == "sending":
            fires.append(key[len(prefix):])
    return fires


def test_an_arq_function_runs_in_the_trace_of_the_fire_that_enqueued_it(
        tmp_path: Path, venv: Path, redis_url: str, r: redis.Redis,
        monkeypatch: pytest.MonkeyPatch) -> None:
    broker, ledger = broker_of(redis_url), tmp_path / "runs.jsonl"
    fleet = ArqFleet(tmp_path, venv, redis_url, {"traced": {
        "cron": "0 0 1 1 *", "timeout": "30s", "arq": target(broker, "traced")}})
    with otlp_receiver() as receiver, arq_worker(tmp_path, venv, broker, redis_url, ledger):
        for name, value in receiver.env().items():  # the cronsvc worker's environment
            monkeypatch.setenv(name, value)
        with fleet.running("w1", planner=False):
            fire = fleet.trigger("traced")
            span = receiver.fire(fire)
            wait_for(lambda: len(receiver.children(span)) == 2, timeout=30,
                     message="the run and ack spans of the fire")
    assert span.attributes["cronsvc.outcome"] == "ok"
    run = receiver.children(span)["cronsvc.run"]
    assert run.attributes["messaging.system"] == "arq"
    (ran,) = [line for line in read_runs(ledger) if line["fire"] == fire]
    assert run.parent_of(ran["current"])  # the function ran in the fire's trace
