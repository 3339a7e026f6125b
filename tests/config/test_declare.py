"""The @cronsvc.job decorator: what it records of a function or a Celery task, and the
problems it records instead of raising (a user's module must import wherever it is
imported)."""

from __future__ import annotations

import inspect
from datetime import UTC, datetime, timedelta
from typing import Any

from celery import Celery

import cronsvc
from cronsvc.config.declare import DECLARED, Declaration, job_name
from tests.support import celery_app

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
