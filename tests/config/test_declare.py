"""The @cronsvc.job decorator: what it records of a function, a Celery task, a dramatiq
actor, or a function sent to RQ or arq (``via=``), and the problems it records instead
of raising (a user's module must import wherever it is imported)."""

from __future__ import annotations

import inspect
from datetime import UTC, datetime, timedelta
from typing import Any

import dramatiq
from celery import Celery

import cronsvc
from cronsvc.config.declare import DECLARED, Declaration, job_name
from tests.support import celery_app, dramatiq_app

HERE = "tests/config/test_declare.py"


def last() -> Declaration:
    return DECLARED[-1]


def line_of(obj: Any) -> int:
    """The line of the decorator above ``obj``."""
    return inspect.getsourcelines(obj)[1]


@cronsvc.job("0 9 * * *", timezone="Europe/Berlin", overlap="forbid", retries=2)
def send_daily_digest(team: str = "core", ctx: Any = None) -> str:
    return f"digest for {team}"


DIGEST = last()


@cronsvc.job(every="5m", name="poller", start=datetime(2027, 1, 1, tzinfo=UTC),
             timeout=timedelta(seconds=90))
async def poll(ctx: Any = None) -> str:
    return "polled"


POLL = last()


@cronsvc.job
def _on_demand_only_(ctx: Any = None) -> None:
    pass


ON_DEMAND = last()


def test_a_function_declares_a_call_job_at_the_line_of_its_decorator() -> None:
    assert DIGEST.name == "send-daily-digest"
    assert DIGEST.fields == {"cron": "0 9 * * *", "timezone": "Europe/Berlin",
                             "overlap": "forbid", "retries": 2,
                             "call": "tests.config.test_declare:send_daily_digest"}
    assert DIGEST.place == f"{HERE}:{line_of(send_daily_digest)}"
    assert DIGEST.file.endswith(HERE) and DIGEST.problems == []
    # The function is left as it was: still called as before.
    assert send_daily_digest("ops") == "digest for ops"


def test_every_without_cron_a_name_and_values_python_writes_as_the_file_would() -> None:
    assert POLL.name == "poller"
    assert POLL.fields == {"every": "5m", "start": "2027-01-01T00:00:00+00:00",
                           "timeout": 90.0, "call": "tests.config.test_declare:poll"}
    assert inspect.iscoroutinefunction(poll)  # an async function is declared the same way
    assert POLL.problems == []


def test_the_bare_decorator_declares_a_job_run_only_when_triggered() -> None:
    assert ON_DEMAND.name == "on-demand-only"
    assert ON_DEMAND.fields == {"call": "tests.config.test_declare:_on_demand_only_"}
    assert job_name("__x__y") == "x-y"


def test_what_a_worker_cannot_import_or_a_file_cannot_hold_is_recorded_not_raised() -> None:
    def inner() -> None:
        pass

    assert cronsvc.job("@daily")(inner) is inner
    assert last().problems == [("call", "tests.config.test_declare:test_what_a_worker_cannot_"
                                "import_or_a_file_cannot_hold_is_recorded_not_raised.<locals>."
                                "inner is defined inside a function: a worker cannot import "
                                "it; declare it at module level")]
    cronsvc.job("@daily", kwargs={"when": object()}, cron="@hourly")(send_daily_digest)
    assert last().problems == [
        ("cron", "given twice: as the first argument and by name"),
        ("kwargs", "a value of type object cannot be written in a job file (strings, "
                   "numbers, lists, mappings, datetime and timedelta can)")]
    assert "kwargs" not in last().fields


def test_stacked_on_a_celery_task_it_declares_a_celery_job_of_its_app() -> None:
    task = celery_app.digest
    assert cronsvc.job("0 8 * * 1-5", queue="reports", args=["core"])(task) is task
    assert last().name == "digest"
    assert last().fields == {"cron": "0 8 * * 1-5", "celery": {
        "task": "tests.digest", "queue": "reports", "args": ["core"],
        "app": "tests.support.celery_app:app"}}
    assert last().problems == []


def test_a_celery_task_whose_app_no_module_holds_needs_app_or_broker() -> None:
    app = Celery("nowhere", broker="memory://")

    @app.task(name="nowhere.report")
    def report() -> None:
        pass

    cronsvc.job("@daily")(report)
    assert last().problems == [("celery.app", "cannot tell which module holds the Celery app "
                                "of task nowhere.report: give app='module:attribute' or "
                                "broker=URL")]
    cronsvc.job("@daily", broker="redis://127.0.0.1:6379/1")(report)
    assert last().problems == [] and last().fields["celery"] == {
        "task": "nowhere.report", "broker": "redis://127.0.0.1:6379/1"}


@cronsvc.job("30 6 * * *", via="rq", queue="reports", redis="${RQ_REDIS_URL}",
             args=["core"], options={"job_timeout": 600})
def rebuild_index(team: str) -> str:
    return f"index of {team}"


REBUILD = last()


@cronsvc.job(every="10m", via="arq", redis="redis://127.0.0.1:6379/2", kwargs={"size": 3},
             name="arq-digest")
async def arq_digest(ctx: dict[str, Any], size: int = 0) -> str:
    return f"digest of {size}"


ARQ_DIGEST = last()


def test_via_rq_declares_an_rq_job_of_the_functions_dotted_name() -> None:
    assert REBUILD.name == "rebuild-index" and REBUILD.problems == []
    assert REBUILD.fields == {"cron": "30 6 * * *", "rq": {
        "func": "tests.config.test_declare.rebuild_index", "queue": "reports",
        "redis": "${RQ_REDIS_URL}", "args": ["core"], "options": {"job_timeout": 600}}}
    assert REBUILD.place == f"{HERE}:{line_of(rebuild_index)}"
    assert rebuild_index("ops") == "index of ops"  # still the user's function


def test_via_arq_declares_an_arq_job_of_the_functions_name() -> None:
    assert ARQ_DIGEST.name == "arq-digest" and ARQ_DIGEST.problems == []
    assert ARQ_DIGEST.fields == {"every": "10m", "arq": {
        "function": "arq_digest", "redis": "redis://127.0.0.1:6379/2",
        "kwargs": {"size": 3}}}
    assert inspect.iscoroutinefunction(arq_digest)


def test_an_arq_function_must_be_async_and_name_its_redis() -> None:
    cronsvc.job("@daily", via="arq", redis="redis://127.0.0.1:6379/2")(rebuild_index)
    assert last().problems == [("arq.function", "rebuild_index is not async: arq runs "
                                "'async def f(ctx, ...)' functions")]
    assert "arq" not in last().fields
    cronsvc.job("@daily", via="arq")(arq_digest)
    assert last().problems == [("arq.redis", "give redis= the URL of arq's Redis "
                                "(redis://..., or '${VAR}' to read it from the worker's "
                                "environment)")]


def test_an_async_function_without_via_stays_a_call_job() -> None:
    cronsvc.job("@daily")(arq_digest)
    assert last().fields == {"cron": "@daily",
                             "call": "tests.config.test_declare:arq_digest"}


def test_via_names_a_job_queue_that_fits_what_it_is_written_on() -> None:
    cronsvc.job("@daily", via="huey")(rebuild_index)
    assert last().problems == [("via", "unknown job queue 'huey'; expected one of celery, "
                                "dramatiq, rq, arq (without via, a function is a call job)")]
    cronsvc.job("@daily", via="celery")(rebuild_index)
    assert last().problems == [("via", "via='celery' is for a Celery task (@app.task), not "
                                "an object of type function")]
    cronsvc.job("@daily", via="rq")(celery_app.digest)
    assert last().problems == [("via", "via='rq' is for a function RQ runs, not an object of "
                                "type PromiseProxy")]
    # A Celery task said to be one: the same job as without via.
    cronsvc.job("@daily", via="celery")(celery_app.digest)
    assert last().problems == [] and last().fields["celery"]["task"] == "tests.digest"


def test_a_function_rq_cannot_import_is_recorded() -> None:
    def inner() -> None:
        pass

    cronsvc.job("@daily", via="rq")(inner)
    assert last().problems == [("rq.func", "tests.config.test_declare:test_a_function_rq_"
                                "cannot_import_is_recorded.<locals>.inner is defined inside "
                                "a function: a worker cannot import it; declare it at module "
                                "level")]


def test_stacked_on_a_dramatiq_actor_it_declares_a_dramatiq_job() -> None:
    actor = dramatiq_app.digest
    assert cronsvc.job("0 7 * * *", broker="${DRAMATIQ_BROKER_URL}", args=["core"],
                       wait=False)(actor) is actor
    assert last().name == "digest" and last().problems == []
    assert last().fields == {"cron": "0 7 * * *", "dramatiq": {
        "actor": "digest", "queue": "default", "broker": "${DRAMATIQ_BROKER_URL}",
        "args": ["core"], "wait": False}}


def test_a_dramatiq_actor_needs_its_broker_url_and_keeps_its_queue() -> None:
    @dramatiq.actor(actor_name="proj.reports.weekly", queue_name="reports",
                    broker=dramatiq_app.broker)
    def weekly() -> None:
        pass

    cronsvc.job("@weekly")(weekly)
    assert last().name == "weekly"
    assert last().problems == [("dramatiq.broker", "give broker= the URL of actor "
                                "proj.reports.weekly's broker (redis://, amqp://, or "
                                "'${VAR}' to read it from the worker's environment): it "
                                "cannot be read back from the broker object")]
    cronsvc.job("@weekly", broker="redis://127.0.0.1:6379/3", queue="default")(weekly)
    assert last().problems == [("dramatiq.queue", "actor proj.reports.weekly reads queue "
                                "'reports', where its messages go: give the queue to "
                                "@dramatiq.actor(queue_name=...)")]
    cronsvc.job("@weekly", broker="redis://127.0.0.1:6379/3", queue="reports")(weekly)
    assert last().problems == [] and last().fields["dramatiq"] == {
        "actor": "proj.reports.weekly", "queue": "reports",
        "broker": "redis://127.0.0.1:6379/3"}
