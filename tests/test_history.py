"""The history record and the reasons a fire is dropped or a run stopped (cronsvc.history)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from cronsvc.errors import BadArgument
from cronsvc.history import FIELDS as RECORD_FIELDS
from cronsvc.history import (
    Cancel,
    Drop,
    drop_explained,
    drop_status,
    encoded,
    encoded_run,
    record,
)
from cronsvc.store.replies import record_json

FIELDS = ["fire", "job", "status", "reason", "scheduled", "started", "duration_ms", "attempt",
          "worker", "exit_code", "output"]
EMPTY = dict.fromkeys(FIELDS)


@pytest.mark.parametrize(("fire", "status", "extra", "expected"), [
    ("a@1000", "ok", {}, {"fire": "a@1000", "job": "a", "status": "ok", "scheduled": 1000}),
    ("a@1000#tabcdef", "failed",
     {"reason": "exit 1", "started": 1100, "duration_ms": 5, "attempt": 2, "worker": "w",
      "exit_code": 1, "output": "boom"},
     {"fire": "a@1000#tabcdef", "job": "a", "status": "failed", "reason": "exit 1",
      "scheduled": 1000, "started": 1100, "duration_ms": 5, "attempt": 2, "worker": "w",
      "exit_code": 1, "output": "boom"}),
    # job and scheduled given: the fire id is not read
    ("not a fire id", "dead", {"job": "j", "scheduled": 7},
     {"fire": "not a fire id", "job": "j", "status": "dead", "scheduled": 7}),
    ("a@1000", "skipped", {"job": "other"},
     {"fire": "a@1000", "job": "other", "status": "skipped", "scheduled": 1000}),
    ("a@1000", "missed", {"scheduled": 990},
     {"fire": "a@1000", "job": "a", "status": "missed", "scheduled": 990}),
])
def test_record(fire: str, status: str, extra: dict[str, Any], expected: dict[str, Any]
                ) -> None:
    made = record(fire, status, **extra)
    assert made == {**EMPTY, **expected}
    assert list(made) == FIELDS  # the order the history shows


@pytest.mark.parametrize("extra", [{}, {"job": "j"}, {"scheduled": 7}])
def test_record_of_a_bad_fire_id_without_job_and_time(extra: dict[str, Any]) -> None:
    with pytest.raises(BadArgument, match="^not a fire id: 'nope'"):
        record("nope", "dead", **extra)


@pytest.mark.parametrize(("reason", "status", "explained"), [
    ("removed", "skipped", "removed"),
    ("schedule removed", "skipped", "schedule removed"),
    ("paused", "skipped", "paused"),
    ("missed", "missed", "missed"),
    ("catch_up latest", "skipped", "catch_up latest"),
    ("overlap forbid", "skipped", "overlap forbid"),
    ("dead", "dead",
     "no attempts left: lease lost on the last attempt (its worker died or lost Redis)"),
    ("dead: job removed", "dead", "dead: job removed"),
    ("definition not held", "missed",
     "missed: no live worker holds this definition of the job (their job files differ)"),
    # what an older or newer claim script may say: a skip, in its own words
    ("nonsense", "skipped", "nonsense"),
    ("", "skipped", ""),
    ("Paused", "skipped", "Paused"),
])
def test_drop_status_and_explained(reason: str, status: str, explained: str) -> None:
    assert (drop_status(reason), drop_explained(reason)) == (status, explained)
    if reason in {d.value for d in Drop}:
        assert (Drop(reason).status, Drop(reason).explained) == (status, explained)


def test_every_drop_is_in_the_table() -> None:
    assert sorted(d.value for d in Drop) == sorted([
        "removed", "schedule removed", "paused", "missed", "catch_up latest", "overlap forbid",
        "dead", "dead: job removed", "definition not held"])


@pytest.mark.parametrize(("cancel", "value"), [
    (Cancel.REPLACED, "replaced"), (Cancel.LEASE_LOST, "lease lost"),
    (Cancel.SHUTDOWN, "shutdown"),
])
def test_cancel_values(cancel: Cancel, value: str) -> None:
    assert cancel == value and str(cancel) == value and Cancel(value) is cancel


def test_every_cancel_is_in_the_table() -> None:
    assert [c.value for c in Cancel] == ["replaced", "lease lost", "shutdown"]


def test_the_record_fields_are_the_contract_in_order() -> None:
    assert list(RECORD_FIELDS) == FIELDS


@pytest.mark.parametrize("r", [
    record("a@1000", "ok", started=1003, duration_ms=0, attempt=1, worker="w-1@host:42"),
    record("a@1000!s1", "failed", reason='exit "3"\n\u2028\x00', started=-5, duration_ms=7,
           attempt=2, worker=None, exit_code=-9, output="é€😀\\/" + "x" * 500),
    record("ünï@1000#t", "lost", job="ünï", scheduled=1000, reason="lease lost: worker ?"),
    record("a@1000", "ok", scheduled=2**70, started=0),
])
def test_a_record_is_encoded_as_json_writes_it(r: dict[str, Any]) -> None:
    expected = json.dumps(r, separators=(",", ":"))
    assert encoded(r) == expected
    assert encoded_run(*r.values()) == expected  # its values, without the record
    assert record_json(r) == expected
    assert json.loads(expected) == r


@pytest.mark.parametrize("r", [
    record("a@1000", "ok", attempt=True),  # JSON true, not 1
    record("a@1000", "ok", duration_ms=1.5),  # type: ignore[arg-type]
    record("a@1000", "ok", output=["x"]),  # type: ignore[arg-type]
    {**record("a@1000", "ok"), "extra": 1},
    dict(reversed(record("a@1000", "ok").items())),
    {"fire": "a@1000"},
])
def test_what_is_not_a_plain_record_is_left_to_json(r: dict[str, Any]) -> None:
    assert encoded(r) is None
    if tuple(r) == RECORD_FIELDS:
        assert encoded_run(*r.values()) is None
    assert record_json(r) == json.dumps(r, separators=(",", ":"), default=str)
