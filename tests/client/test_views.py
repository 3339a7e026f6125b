"""What the client returns, built from raw Redis values (cronsvc.client.views): pure, no Redis."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest

from cronsvc.client import views
from cronsvc.client.views import (
    InFlight,
    JobInfo,
    Member,
    QueuedFire,
    QueueView,
    Resumed,
    definition_gaps,
    in_flight,
    job_info,
    last_run,
    member,
    queued,
    score_ms,
    spec_of,
)
from cronsvc.schedule.expand import Spec

T0 = 1_900_000_000_000  # 2030-03-17T17:46:40Z, a Sunday
HOUR = 3_600_000
INT64_MAX = 2**63 - 1


def js(value: Any) -> str:
    return json.dumps(value)


# -- which workers can run what: pure ---------------------------------------------------------
@pytest.mark.parametrize(("published", "held", "gaps", "unrunnable"), [
    ({"a": "1"}, {}, {}, []),  # no live worker says what it holds
    ({"a": "1", "b": "2"}, {"w": {"a": "1", "b": "2", "extra": "9"}}, {}, []),
    ({"a": "1", "b": "2"}, {"w": {"a": "1"}}, {"w": ["lacks b"]}, ["b"]),
    ({"a": "1", "b": "2"}, {"w": {"a": "1", "b": "3"}},
     {"w": ["another definition of b"]}, ["b"]),
    ({"a": "1", "b": "2", "c": "3"}, {"old": {"a": "0", "b": "2"}, "new": {"a": "1", "c": "3"}},
     {"old": ["lacks c", "another definition of a"], "new": ["lacks b"]}, []),
    ({"a": "1", "b": "2"}, {"x": {"b": "0"}, "y": {"b": "1"}},
     {"x": ["lacks a", "another definition of b"], "y": ["lacks a", "another definition of b"]},
     ["a", "b"]),
    # A line an older planner published names no definition: any version of the job will do.
    ({"a": ""}, {"w": {"a": "7"}}, {}, []),
    ({"a": ""}, {"w": {}}, {"w": ["lacks a"]}, ["a"]),
])
def test_definition_gaps(published: dict[str, str], held: dict[str, dict[str, str]],
                         gaps: dict[str, list[str]], unrunnable: list[str]) -> None:
    assert definition_gaps(published, held) == (gaps, unrunnable)


# -- job_info: one published job ------------------------------------------------------------
HOURLY = js({"cron": "0 * * * *", "timezone": "UTC", "jitter": 0})
NEXT_HOUR = T0 - T0 % HOUR + HOUR
OK_RUN = {"fire": "a@1", "status": "ok", "started": 5}
SKIP = {"fire": "a@2", "status": "skipped", "started": None}


@pytest.mark.parametrize(("line", "spec", "pause", "records", "expected"), [
    ("d1|all|0|allow|3|0|def", HOURLY, None, [], dict(
        cron="0 * * * *", description="every hour", timezone="UTC", jitter=0.0,
        catch_up="all", overlap="allow", max_attempts=3, paused=False, pause_note=None,
        paused_since_ms=None, paused_in_file=False, next_fire_ms=NEXT_HOUR, last_run=None,
        starting_deadline_ms=0)),
    # paused at run time and in the file, with a starting deadline
    ("d1|none|60000|forbid|1|1|def", js({"cron": "30 2 * * *", "timezone": "Europe/Berlin"}),
     js({"note": "maintenance", "since": T0 - 5}), [js(SKIP), js(OK_RUN)], dict(
         cron="30 2 * * *", description="at 02:30 every day", timezone="Europe/Berlin",
         catch_up="none", overlap="forbid", max_attempts=1, paused=True,
         pause_note="maintenance", paused_since_ms=T0 - 5, paused_in_file=True,
         next_fire_ms=1_900_027_800_000,  # 2030-03-18T02:30+01:00
         last_run=OK_RUN, starting_deadline_ms=60_000)),
    # a pause without note or time still pauses
    ("d1|all|0|allow|3|0|def", HOURLY, js({"note": "", "since": "x"}), [], dict(
        paused=True, pause_note=None, paused_since_ms=None, paused_in_file=False)),
    # no spec published: an empty schedule; a short line reads as its defaults
    ("d1|latest", None, None, [js(SKIP)], dict(
        cron="", description="", timezone="UTC", jitter=0.0, next_fire_ms=None,
        catch_up="latest", overlap="", max_attempts=1, last_run=SKIP)),
    # a schedule that never fires again shows no next fire
    ("d1|all|0|allow|3|0|def", js({"cron": "0 0 30 2 *"}), None, [], dict(
        cron="0 0 30 2 *", next_fire_ms=None, timezone="UTC")),
])
def test_job_info(line: str, spec: str | None, pause: str | None, records: list[str],
                  expected: dict[str, Any]) -> None:
    info = job_info("a", line, spec, pause, views.records("k", records, []), T0)
    assert isinstance(info, JobInfo) and info.name == "a"
    assert {k: getattr(info, k) for k in expected} == expected


def test_job_info_with_jitter_moves_the_next_fire_into_the_hour() -> None:
    spec = js({"cron": "0 * * * *", "timezone": "UTC", "jitter": 600})
    info = job_info("a", "d1|all|0|allow|3|0|def", spec, None, [], T0)
    assert info.jitter == 600.0
    assert info.next_fire_ms is not None and NEXT_HOUR <= info.next_fire_ms < NEXT_HOUR + 600_000


# -- last_run: the newest run, else the newest record -------------------------------------------
@pytest.mark.parametrize(("records", "found"), [
    ([], None),
    ([js(OK_RUN)], OK_RUN),
    ([js(SKIP), js(SKIP), js(OK_RUN)], OK_RUN),  # skips do not hide the last run
    ([js(SKIP), js({"status": "missed"})], SKIP),  # no run: the newest record says why
    (["not json", js(OK_RUN)], OK_RUN),
    (["[1]", "nope"], None),  # nothing readable
])
def test_last_run(records: list[str], found: dict[str, Any] | None) -> None:
    assert last_run(views.records("k", records, [])) == found


def test_records_leave_out_and_name_the_lines_that_are_none() -> None:
    unreadable: list[str] = []
    lines = ["not json", js(OK_RUN), "[1]", js({"fire": "a@1"}), js(SKIP)]
    assert views.records("cron:history:a", lines, unreadable) == [OK_RUN, SKIP]
    assert unreadable == [f"cron:history:a {x!r}: not a history record"
                          for x in ("not json", "[1]", js({"fire": "a@1"}))]


# -- in_flight, queued, member: one member of a sorted set -----------------------------------
@pytest.mark.parametrize(("fid", "lease", "claim", "expected"), [
    ("a@1000", 5000.0, js({"worker": "w1", "token": "2", "claimed_at": 900}),
     InFlight("a@1000", "a", 1000, 5000, "w1", 2, 900)),
    ("a@1000#tabcdef", 5000.9, None, InFlight("a@1000#tabcdef", "a", 1000, 5000, None, None,
                                              None)),
    ("a@1000", 5000.0, "not json", InFlight("a@1000", "a", 1000, 5000, None, None, None)),
    ("a@1000", float("inf"), js({"token": "x"}),
     InFlight("a@1000", "a", 1000, INT64_MAX, None, None, None)),
])
def test_in_flight(fid: str, lease: float, claim: str | None, expected: InFlight) -> None:
    assert in_flight(fid, lease, claim) == expected


@pytest.mark.parametrize(("fid", "score", "attempts", "expected"), [
    ("a@1000", 1000.0, None, QueuedFire("a@1000", "a", "cron", 1000, 1000, 0)),
    ("a@1000", 61_000.0, "2", QueuedFire("a@1000", "a", "cron", 1000, 61_000, 2)),  # a retry
    ("b@5#tabcdef", 5.0, "0", QueuedFire("b@5#tabcdef", "b", "trigger", 5, 5, 0)),
    ("b@5#aabcdef", 5.0, "x", QueuedFire("b@5#aabcdef", "b", "at", 5, 5, 0)),
    ("b@5", float("-inf"), None, QueuedFire("b@5", "b", "cron", 5, -INT64_MAX, 0)),
])
def test_queued(fid: str, score: float, attempts: str | None, expected: QueuedFire) -> None:
    assert queued(fid, score, attempts) == expected


@pytest.mark.parametrize(("seen", "info", "expected"), [
    (T0 - 1000, js({"busy": 1, "slots": 4}),
     Member("w", T0 - 1000, True, {"busy": 1, "slots": 4})),
    (T0 - 5000, None, Member("w", T0 - 5000, True, {})),  # exactly stale_ms: still alive
    (T0 - 5001, "[]", Member("w", T0 - 5001, False, {})),
    (float(T0 + 10), "{", Member("w", T0 + 10, True, {})),
])
def test_member(seen: float, info: str | None, expected: Member) -> None:
    assert member("w", seen, info, T0, 5000) == expected


@pytest.mark.parametrize(("score", "ms"), [
    (0.0, 0), (1.9, 1), (-2.5, -2), (float(T0), T0),
    (float("inf"), INT64_MAX), (float("-inf"), -INT64_MAX),
])
def test_score_ms(score: float, ms: int) -> None:
    assert score_ms(score) == ms


@pytest.mark.parametrize(("spec", "expected"), [
    (js({"cron": "* * * * *"}), Spec("* * * * *", "UTC", name="j", jitter=0.0)),
    (js({"cron": "* * * * *", "timezone": None, "jitter": None}),
     Spec("* * * * *", "UTC", name="j", jitter=0.0)),
    (js({"cron": "0 9 * * *", "timezone": "Asia/Tokyo", "jitter": "30"}),
     Spec("0 9 * * *", "Asia/Tokyo", name="j", jitter=30.0)),
])
def test_spec_of(spec: str, expected: Spec) -> None:
    assert spec_of("j", spec) == expected


@pytest.mark.parametrize(("oldest", "lateness"), [(None, 0), (T0 - 6, 6), (T0 + 40, 0)])
def test_queue_lateness(oldest: int | None, lateness: int) -> None:
    view = QueueView(now_ms=T0, due_count=0, ahead_count=0, oldest_due_ms=oldest, due=[],
                     ahead=[], in_flight=[])
    assert view.lateness_ms == lateness


@pytest.mark.parametrize(("was_paused", "truth"), [(True, True), (False, False)])
def test_resumed_is_true_when_the_job_was_paused(was_paused: bool, truth: bool) -> None:
    assert bool(Resumed("a", was_paused)) is truth


def test_every_view_is_json_ready() -> None:
    info = job_info("a", "d1|all|0|allow|3|0|def", HOURLY, None, [OK_RUN], T0)
    fire = in_flight("a@1000", float("inf"), None)
    assert json.loads(json.dumps(dataclasses.asdict(info)))["last_run"] == OK_RUN
    assert json.loads(json.dumps(dataclasses.asdict(fire)))["lease_until_ms"] == INT64_MAX


@pytest.mark.parametrize(("spec", "cron", "description", "next_fire"), [
    ({"cron": None, "timezone": "UTC", "jitter": 0, "every_ms": 90 * 60_000},
     "every 90m", "every 90 minutes", T0 - T0 % (90 * 60_000) + 90 * 60_000),
    ({"cron": None, "timezone": "UTC", "jitter": 0}, "", "when triggered (no schedule)", None),
    ({"cron": "0 * * * *", "timezone": "UTC", "jitter": 0, "end_ms": T0 - 1},
     "0 * * * *", "every hour, until 2030-03-17T17:46:39.999Z", None),
])
def test_job_info_of_intervals_bounds_and_triggered_only_jobs(
        spec: dict[str, Any], cron: str, description: str, next_fire: int | None) -> None:
    info = job_info("a", "d1|all|0|allow|3|0|def", js(spec), None, [], T0)
    assert (info.cron, info.description, info.next_fire_ms) == (cron, description, next_fire)
