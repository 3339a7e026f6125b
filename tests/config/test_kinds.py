"""What a job of each kind is to the rest of the fleet, pinned: its definition digest, the
order of a job's keys, and its definition as the API and the dashboard show it.

A digest that changes for a file that did not makes every worker of a rolling deploy
refuse the fires the planners publish (cronsvc/policy.py), so they are literal here.
"""

from __future__ import annotations

from typing import Any

import pytest

from cronsvc.config.models import Job
from cronsvc.kinds import KINDS, KindFields
from cronsvc.web.api import definition
from cronsvc.web.pages import _definition

BACKUP = Job(name="backup", cron="0 3 * * *", command="tar -czf '/tmp/my backup.tgz' /etc")
SHELL = Job(name="sh", cron="@daily", command="ls | wc -l", shell=True, env={"A": "1"},
            cwd="/tmp", timeout=30)
REPORT = Job(name="report", cron="0 6 * * *", call="reports.weekly:run", args=[1, "x"],
             kwargs={"k": [1, 2]}, retries=3, backoff="1m")
PING = Job(name="ping", every="90s", call="cronsvc.examples:ping")
COMMON = {"timeout": None, "retries": 0, "overlap": "allow", "catch_up": "latest",
          "starting_deadline": None, "jitter": 0.0, "description": "", "tags": [],
          "max_concurrent": None, "limits": {}, "notify": [], "notify_on": [],
          "pause_after_failures": None, "on_success": [], "on_failure": [],
          "declared_at": ""}


def test_every_kind_is_registered_with_its_fields() -> None:
    # A kind in the table without its fields in a job (or the other way) is half added.
    assert set(KindFields.__bases__) == {kind.fields for kind in KINDS.values()}
    for key, kind in KINDS.items():
        assert kind.key == key and key in kind.fields.model_fields
        assert kind.per_job <= kind.fields.model_fields.keys()


@pytest.mark.parametrize(("job", "kind", "digest"), [
    (BACKUP, "command", "9cbaf7ccbbb8"),
    (SHELL, "command", "790e3f49429c"),
    (REPORT, "call", "248005765597"),
    (PING, "call", "e9d1ec564022"),
])
def test_the_definition_digest_of_each_kind_stays(job: Job, kind: str, digest: str) -> None:
    assert (job.kind, job.definition) == (kind, digest)


def test_a_job_keeps_the_order_of_its_keys() -> None:
    # Pydantic checks fields in this order: the errors of one line come out in it.
    assert list(Job.model_fields) == [
        "name", "cron", "every", "anchor", "start", "end", "max_runs", "timezone", "shell",
        "command", "call", "args", "kwargs", "http", "celery", "rq", "dramatiq", "arq", "env",
        "cwd", "timeout", "retries", "backoff", "backoff_max", "overlap", "max_concurrent",
        "pool", "catch_up", "starting_deadline", "jitter", "paused", "description", "tags",
        "ping", "notify", "notify_on", "pause_after_failures", "slot_limits", "skip",
        "business_days", "only", "on_success", "on_failure", "calendar", "output", "history",
        "declared_at"]


@pytest.mark.parametrize(("job", "own", "set_"), [
    (BACKUP, {"kind": "command", "command": ("tar", "-czf", "/tmp/my backup.tgz", "/etc"),
              "shell": False}, {}),
    (SHELL, {"kind": "command", "command": ("ls | wc -l",), "shell": True},
     {"env": ["A"], "cwd": "/tmp", "timeout": 30.0}),
    (REPORT, {"kind": "call", "call": "reports.weekly:run", "args": [1, "x"],
              "kwargs": {"k": [1, 2]}}, {"retries": 3}),
])
def test_the_api_shows_the_definition_of_each_kind(job: Job, own: dict[str, Any],
                                                   set_: dict[str, Any]) -> None:
    shown = definition(job)
    assert shown == {**own, "env": [], "cwd": None, **COMMON, **set_}
    assert shown is not None and list(shown)[:len(own) + 2] == [*own, "env", "cwd"]


@pytest.mark.parametrize(("job", "rows"), [
    (BACKUP, [("command", "tar -czf /tmp/my backup.tgz /etc")]),
    (SHELL, [("command", "ls | wc -l"), ("shell", "true"), ("env", "A"), ("cwd", "/tmp"),
             ("timeout", "30 s")]),
    (REPORT, [("call", "reports.weekly:run"), ("args", '[1, "x"]'),
              ("kwargs", '{"k": [1, 2]}'), ("retries", "3")]),
    (PING, [("call", "cronsvc.examples:ping")]),
])
def test_the_dashboard_shows_the_fields_set(job: Job, rows: list[tuple[str, str]]) -> None:
    assert _definition(job) == rows
