"""Traces of a real worker's fires, exported over OTLP/HTTP to a real receiver started
here (tests/support/otlp.py): one ``cronsvc.fire <job>`` span per fire with its run and
its ack as children, and the run's trace context passed on, as the current context of
a call (sync and async), as ``TRACEPARENT`` to a command, as the ``traceparent`` header
of an http job's request, and in the message a Celery, RQ or dramatiq job sends, whose
task a real queue worker runs in the fire's trace: one trace links the fire and what it
ran."""

from __future__ import annotations

from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import pytest
import redis

from cronsvc.process.redis_server import RedisServer
from cronsvc.testing import Fleet, history
from tests.support.otlp import Span, otlp_receiver
from tests.support.queues import celery_worker, dramatiq_worker, read_runs, rq_worker
from tests.support.receivers import http_receiver
from tests.support.servers import server_binary
from tests.support.wait import wait_for

pytestmark = pytest.mark.slow


def test_each_fire_is_a_trace_that_reaches_what_it_runs(tmp_path: Path, redis_url: str,
                                                         r: redis.Redis) -> None:
    with otlp_receiver() as receiver, http_receiver() as hook:
        out = {name: str(tmp_path / f"{name}.traceparent")
               for name in ("call", "async", "command")}
        jobs = {
            "report": {"call": "tests.support.traced:work", "kwargs": {"path": out["call"]},
                       "timeout": "30s"},
            "digest": {"call": "tests.support.traced:awaited_work",
                       "kwargs": {"path": out["async"]}},
            "backup": {"command": ["sh", "-c", f'printf %s "$TRACEPARENT" > {out["command"]}']},
            "ping": {"http": {"url": f"{hook.url}/ping"}},
            "broken": {"call": "tests.support.jobs:fail", "kwargs": {"message": "disk full"}},
        }
        fleet = Fleet(tmp_path, redis_url, jobs)
        fleet.env.update(receiver.env())
        with fleet.running("w1", planner=False):
            fires = {job: fleet.trigger(job) for job in jobs}
            spans = {job: receiver.fire(fire) for job, fire in fires.items()}
            wait_for(lambda: all(len(receiver.children(s)) == 2 for s in spans.values()),
                     timeout=30, message="the run and ack spans of every fire")
        logs = fleet.logs()

        for job, span in spans.items():
            assert span.name == f"cronsvc.fire {job}", logs
            assert span.parent_id == ""  # a trace of its own
            assert span.kind == "SPAN_KIND_CONSUMER"
            assert span.resource["service.name"] == "cronsvc-test"
            assert span.resource["deployment.environment.name"] == "test"
            attrs = span.attributes
            assert attrs["cronsvc.job"] == job
            assert attrs["cronsvc.fire.id"] == fires[job]
            assert attrs["cronsvc.fire.attempt"] == 1
            assert attrs["cronsvc.worker"] == "w1"
            assert attrs["cronsvc.fire.kind"] == "trigger"  # run by hand, not on a timer
            assert attrs["faas.trigger"] == "other"
            assert attrs["cronsvc.fire.lag_ms"] >= 0
            run, ack = receiver.children(span)["cronsvc.run"], receiver.children(span)[
                "cronsvc.ack"]
            assert span.start_ns <= run.start_ns <= run.end_ns <= ack.start_ns
            assert ack.end_ns <= span.end_ns
            assert run.trace_id == ack.trace_id == span.trace_id
        assert spans["ping"].attributes["cronsvc.job.kind"] == "http"

        for job in ("report", "digest", "backup", "ping"):
            span = spans[job]
            assert span.attributes["cronsvc.outcome"] == "ok", logs
            assert span.status == "STATUS_CODE_UNSET"
        broken = spans["broken"]
        assert broken.attributes["cronsvc.outcome"] == "failed"
        assert broken.attributes["error.type"] == "failed"
        assert broken.status == "STATUS_CODE_ERROR"
        assert "disk full" in broken.message
        assert receiver.children(broken)["cronsvc.run"].status == "STATUS_CODE_ERROR"
        assert history(r, "broken")[-1]["status"] == "dead"  # no retries: a dead letter

        # What each fire ran is a child of its run span: the user's own spans (calls) and
        # the traceparent handed on (a command's environment, a request's header).
        for job, name in (("report", "user work"), ("digest", "user awaited work")):
            run = receiver.children(spans[job])["cronsvc.run"]
            user = receiver.children(run)[name]
            assert user.trace_id == spans[job].trace_id
            assert user.parent_of(Path(out["call" if job == "report" else "async"]).read_text())
        backup_run = receiver.children(spans["backup"])["cronsvc.run"]
        assert backup_run.parent_of(Path(out["command"]).read_text())
        ping_run = receiver.children(spans["ping"])["cronsvc.run"]
        assert ping_run.kind == "SPAN_KIND_CLIENT"
        (request,) = hook.received
        assert ping_run.parent_of(request.headers["traceparent"])
        assert request.headers["Idempotency-Key"] == fires["ping"]


def dispatched(tmp_path: Path, redis_url: str, r: redis.Redis, kind: str,
               target: dict[str, Any], consumer: AbstractContextManager[Any],
               ledger: Path) -> tuple[Span, dict[str, Any]]:
    """Run one fire of a ``kind`` job sending to ``target`` while ``consumer`` (a real
    queue worker noting its runs in ``ledger``) runs: the fire's run span, and the run
    the task noted."""
    with otlp_receiver() as receiver, consumer:
        fleet = Fleet(tmp_path, redis_url, {"traced": {"timeout": "60s", kind: target}})
        fleet.env.update(receiver.env())
        with fleet.running("w1", planner=False):
            fire = fleet.trigger("traced")
            span = receiver.fire(fire)
            wait_for(lambda: len(receiver.children(span)) == 2, timeout=30,
                     message="the run and ack spans of the fire")
        logs = fleet.logs()
    assert span.attributes["cronsvc.outcome"] == "ok", logs
    assert span.attributes["cronsvc.job.kind"] == kind
    assert history(r, "traced")[-1]["status"] == "ok"
    run = receiver.children(span)["cronsvc.run"]
    assert run.kind == "SPAN_KIND_PRODUCER"
    assert run.attributes["messaging.system"] == kind
    assert run.attributes["messaging.message.id"] == fire
    (ran,) = [line for line in read_runs(ledger) if line.get("fire") == fire and "current" in line]
    assert run.parent_of(ran["current"])  # the task ran in the fire's trace
    return run, ran


def test_a_celery_task_runs_in_the_trace_of_the_fire_that_sent_it(
        tmp_path: Path, redis_url: str, r: redis.Redis, redis_server: RedisServer) -> None:
    ledger = tmp_path / "runs.jsonl"
    with RedisServer(tmp_path / "broker", binary=server_binary()) as broker:
        run, ran = dispatched(tmp_path, redis_url, r, "celery",
                              {"task": "tests.traced", "broker": broker.url},
                              celery_worker(tmp_path, broker.url, redis_server.url, ledger),
                              ledger)
    assert run.parent_of(ran["header"])  # the message's own traceparent header


def test_an_rq_job_runs_in_the_trace_of_the_fire_that_enqueued_it(
        tmp_path: Path, redis_url: str, r: redis.Redis) -> None:
    ledger, url = tmp_path / "runs.jsonl", redis_url.rsplit("/", 1)[0] + "/1"
    dispatched(tmp_path, redis_url, r, "rq",
               {"func": "tests.support.rq_jobs.traced", "redis": url},
               rq_worker(tmp_path, url, redis_url, ledger), ledger)


def test_a_dramatiq_actor_runs_in_the_trace_of_the_fire_that_sent_it(
        tmp_path: Path, redis_url: str, r: redis.Redis) -> None:
    ledger = tmp_path / "runs.jsonl"
    with RedisServer(tmp_path / "broker", binary=server_binary()) as broker:
        dispatched(tmp_path, redis_url, r, "dramatiq",
                   {"actor": "traced", "broker": broker.url},
                   dramatiq_worker(tmp_path, broker.url, redis_url, ledger), ledger)
