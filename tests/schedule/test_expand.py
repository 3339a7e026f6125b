"""Cron expansion: the shared public cases, tables per feature, DST, jitter and `cronsvc next`."""

from __future__ import annotations

import json
import random
import re
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from itertools import islice
from pathlib import Path
from textwrap import dedent
from typing import Any

import pytest
from click.testing import CliRunner
from croniter import croniter

from cronsvc.cli.main import main
from cronsvc.errors import ScheduleError
from cronsvc.keys import stable_hash
from cronsvc.schedule.expand import (
    Spec,
    explain,
    jitter_ms,
    occurrences,
    occurrences_ms,
    validate_cron,
)
from tests.support.paths import DATA, ROOT

# The shared reference cases beside the checkout when present (they may have grown),
# else the copy kept with the tests, so a clone anywhere runs every case.
SHARED_CASES = ROOT.parent / "shared/cron-cases/public.json"
CASES_FILE = SHARED_CASES if SHARED_CASES.exists() else DATA / "cron-cases-public.json"
FAR = timedelta(days=366 * 30)


def utc(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def iso(t: datetime) -> str:
    return t.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def first(expr: str, start: str, n: int, tz: str = "UTC") -> list[str]:
    return [iso(t) for t in islice(occurrences(Spec(expr, tz), utc(start), utc(start) + FAR), n)]


def ms(text: str) -> int:
    return int(utc(text).timestamp() * 1000)


def _public_cases() -> list[Any]:
    cases = json.loads(CASES_FILE.read_text())
    return [pytest.param(c, id=f"{i}:{c['expr']}@{c['tz']}") for i, c in enumerate(cases)]


@pytest.mark.parametrize("case", _public_cases())
def test_public_case(case: dict[str, Any]) -> None:
    expected = case["expected_utc_iso_list"]
    try:
        got = first(case["expr"], case["start_utc_iso"], len(expected), case["tz"])
    except ScheduleError:
        if case["uncertain"]:
            return  # allowed for uncertain cases: a clear refusal
        raise
    assert got == expected, case["rule_note"]


CALENDAR = [
    # month ends: the 31st only in months that have one
    ("0 0 31 * *", "2025-01-01T00:00:00Z",
     ["2025-01-31", "2025-03-31", "2025-05-31", "2025-07-31", "2025-08-31", "2025-10-31"]),
    ("0 0 29 2 *", "2025-01-01T00:00:00Z", ["2028-02-29", "2032-02-29"]),
    ("0 0 L * *", "2024-01-15T00:00:00Z", ["2024-01-31", "2024-02-29", "2024-03-31", "2024-04-30"]),
    # W: nearest weekday, never leaving the month
    ("0 0 15W * *", "2025-02-01T00:00:00Z",
     ["2025-02-14", "2025-03-14", "2025-04-15", "2025-05-15", "2025-06-16"]),
    ("0 0 1W * *", "2025-02-01T12:00:00Z",
     ["2025-02-03", "2025-03-03", "2025-04-01", "2025-05-01", "2025-06-02"]),
    ("0 0 * * 1#2", "2025-01-01T00:00:00Z", ["2025-01-13", "2025-02-10", "2025-03-10"]),
    ("0 0 * * 5L", "2025-01-01T00:00:00Z", ["2025-01-31", "2025-02-28", "2025-03-28"]),
    ("0 0 * * L5", "2025-01-01T00:00:00Z", ["2025-01-31", "2025-02-28", "2025-03-28"]),
    # both day fields restricted: either matches (13th, or any Friday)
    ("0 0 13 * 5", "2025-06-01T00:00:00Z",
     ["2025-06-06", "2025-06-13", "2025-06-20", "2025-06-27", "2025-07-04", "2025-07-11",
      "2025-07-13", "2025-07-18"]),
    # a day field starting with `*`: both must match (1st/11th/21st/31st that is a Monday)
    ("0 0 */10 * 1", "2025-01-01T00:00:00Z", ["2025-03-31", "2025-04-21", "2025-07-21"]),
    ("0 12 * * 7", "2025-01-01T00:00:00Z", ["2025-01-05", "2025-01-12"]),
    ("0 0 1 jan,jul *", "2025-01-01T00:00:00Z", ["2025-07-01", "2026-01-01", "2026-07-01"]),
    ("0 0 * * sat-sun", "2025-01-01T00:00:00Z", ["2025-01-04", "2025-01-05", "2025-01-11"]),
    ("@yearly", "2025-01-01T00:00:00Z", ["2026-01-01", "2027-01-01"]),
    ("@annually", "2025-01-01T00:00:00Z", ["2026-01-01", "2027-01-01"]),
    ("@monthly", "2025-01-01T00:00:00Z", ["2025-02-01", "2025-03-01"]),
    ("@weekly", "2025-01-01T00:00:00Z", ["2025-01-05", "2025-01-12"]),
    ("@daily", "2025-01-01T00:00:00Z", ["2025-01-02", "2025-01-03"]),
    ("@midnight", "2025-01-01T00:00:00Z", ["2025-01-02", "2025-01-03"]),
]


@pytest.mark.parametrize(("expr", "start", "days"), CALENDAR)
def test_calendar(expr: str, start: str, days: list[str]) -> None:
    assert [t[:10] for t in first(expr, start, len(days))] == days


TIMES = [
    ("*/20 * * * *", "2025-01-01T10:05:00Z", ["10:20:00", "10:40:00", "11:00:00"]),
    ("10-40/15 * * * *", "2025-01-01T10:00:00Z", ["10:10:00", "10:25:00", "10:40:00", "11:10:00"]),
    ("@hourly", "2025-01-01T00:00:00Z", ["01:00:00", "02:00:00"]),
    # six fields: the seconds come first
    ("*/15 * * * * *", "2025-01-01T10:00:00Z", ["10:00:15", "10:00:30", "10:00:45", "10:01:00"]),
    ("30 0 12 * * *", "2025-01-01T00:00:00Z", ["12:00:30", "12:00:30"]),
    # strictly after the start
    ("0 9 * * *", "2025-01-01T09:00:00Z", ["09:00:00"]),
]


@pytest.mark.parametrize(("expr", "start", "times"), TIMES)
def test_times_of_day(expr: str, start: str, times: list[str]) -> None:
    assert [t[11:19] for t in first(expr, start, len(times))] == times


DST = [
    # New York falls back 2025-11-02 02:00 EDT -> 01:00 EST (06:00Z)
    ("*/30 * * * *", "America/New_York", "2025-11-02T06:10:00Z",  # start in the second pass
     ["2025-11-02T06:30:00Z", "2025-11-02T07:00:00Z", "2025-11-02T07:30:00Z"]),
    ("30 1 * * *", "America/New_York", "2025-11-02T05:00:00Z",
     ["2025-11-02T05:30:00Z", "2025-11-03T06:30:00Z"]),
    ("30 1 * * *", "America/New_York", "2025-11-02T05:40:00Z",  # start in the first pass
     ["2025-11-03T06:30:00Z"]),
    # Lord Howe: 30-minute shifts. Spring 2025-10-05 02:00 -> 02:30 (15:30Z)
    ("15 2 * * *", "Australia/Lord_Howe", "2025-10-04T00:00:00Z",
     ["2025-10-04T15:30:00Z", "2025-10-05T15:15:00Z"]),
    ("15,30 2 * * *", "Australia/Lord_Howe", "2025-10-04T15:00:00Z",  # two slots, one instant
     ["2025-10-04T15:30:00Z", "2025-10-05T15:15:00Z", "2025-10-05T15:30:00Z"]),
    ("*/15 2 * * *", "Australia/Lord_Howe", "2025-10-04T15:00:00Z",
     ["2025-10-04T15:30:00Z", "2025-10-04T15:45:00Z", "2025-10-05T15:00:00Z"]),
    # ... autumn 2025-04-06 02:00 -> 01:30 (15:00Z): 01:30-02:00 happens twice
    ("45 1 * * *", "Australia/Lord_Howe", "2025-04-05T14:00:00Z",
     ["2025-04-05T14:45:00Z", "2025-04-06T15:15:00Z"]),
    ("*/15 1 * * *", "Australia/Lord_Howe", "2025-04-05T14:00:00Z",
     ["2025-04-05T14:15:00Z", "2025-04-05T14:30:00Z", "2025-04-05T14:45:00Z",
      "2025-04-05T15:00:00Z", "2025-04-05T15:15:00Z", "2025-04-06T14:30:00Z"]),
    # Chatham: +12:45 / +13:45. Spring 2025-09-28 02:45 -> 03:45 (14:00Z)
    ("0 3 * * *", "Pacific/Chatham", "2025-09-27T00:00:00Z",
     ["2025-09-27T14:00:00Z", "2025-09-28T13:15:00Z"]),
    ("*/30 * * * *", "Pacific/Chatham", "2025-09-27T13:40:00Z",
     ["2025-09-27T13:45:00Z", "2025-09-27T14:15:00Z", "2025-09-27T14:45:00Z"]),
]


@pytest.mark.parametrize(("expr", "tz", "start", "expected"), DST)
def test_dst(expr: str, tz: str, start: str, expected: list[str]) -> None:
    assert first(expr, start, len(expected), tz) == expected


TRANSITIONS = [
    ("America/New_York", "2025-03-08T00:00:00Z"), ("America/New_York", "2025-11-01T00:00:00Z"),
    ("Europe/London", "2025-03-29T00:00:00Z"), ("Europe/London", "2025-10-25T00:00:00Z"),
    ("Australia/Lord_Howe", "2025-04-04T00:00:00Z"),
    ("Australia/Lord_Howe", "2025-10-03T00:00:00Z"),
    ("Pacific/Chatham", "2025-04-04T00:00:00Z"), ("Pacific/Chatham", "2025-09-26T00:00:00Z"),
    ("America/Sao_Paulo", "2018-02-16T00:00:00Z"), ("America/Sao_Paulo", "2018-11-02T00:00:00Z"),
]
EXPRS = ["*/7 * * * *", "0 1-3 * * *", "30 2 * * *", "*/15 0-3 * * *", "45 * * * *",
         "0,30 23,0,1 * * *", "*/20 * * * * *"]


@pytest.mark.parametrize(("tz", "start"), TRANSITIONS)
def test_fast_path_agrees_with_slot_by_slot_mapping(tz: str, start: str) -> None:
    lo = ms(start)
    hi = lo + 4 * 86_400_000
    for expr in EXPRS:
        spec = Spec(expr, tz, "job", jitter=3.0)
        fast = occurrences_ms(spec, lo, hi)
        slow = [int(f.utc.timestamp() * 1000)
                for f in explain(spec, utc(start), utc(start) + timedelta(days=4)) if f.runs]
        assert fast == slow, expr
        assert all(a < b for a, b in zip(fast, fast[1:], strict=False)), expr
        # any split of the window gives the same fires
        pieces = [occurrences_ms(spec, a, a + 3_600_000) for a in range(lo, hi, 3_600_000)]
        assert [u for piece in pieces for u in piece] == fast, expr


def _random_field(rng: random.Random, low: int, high: int) -> str:
    a, b = sorted(rng.sample(range(low, high + 1), 2))
    return rng.choice([
        "*", f"*/{rng.randint(2, 9)}", str(a), f"{a}-{b}", f"{a}-{b}/{rng.randint(2, 5)}",
        f"{a},{b}",
    ])


def _random_expr(rng: random.Random) -> str:
    fields = [_random_field(rng, 0, 59), _random_field(rng, 0, 23), _random_field(rng, 1, 28),
              _random_field(rng, 1, 12), _random_field(rng, 0, 6)]
    if rng.random() < 0.2:
        fields[2] = rng.choice(["L", "15", "*"])
    if rng.random() < 0.2:
        fields = [_random_field(rng, 0, 59), *fields]
    return " ".join(fields)


def test_fast_path_matches_croniter_in_utc() -> None:
    rng = random.Random(20250115)
    for _ in range(300):
        expr = _random_expr(rng)
        start = datetime(2025, 1, 1) + timedelta(seconds=rng.randrange(3 * 365 * 86400))
        it = croniter(expr, start, implement_cron_bug=True,
                      second_at_beginning=len(expr.split()) == 6)
        expected = [iso(it.get_next(datetime).replace(tzinfo=UTC)) for _ in range(15)]
        assert first(expr, iso(start.replace(tzinfo=UTC)), 15) == expected, expr


def test_jitter_is_fixed_per_job_and_within_bound() -> None:
    spec = Spec("* * * * *", name="reports.daily", jitter=30.0)
    offset = stable_hash("reports.daily") % 30_001
    assert jitter_ms(spec) == offset
    fires = occurrences_ms(spec, ms("2025-01-01T00:00:00Z"), ms("2025-01-01T01:00:00Z"))
    assert {u % 60_000 for u in fires} == {offset}
    assert fires == occurrences_ms(Spec("* * * * *", name="reports.daily", jitter=30.0),
                                   ms("2025-01-01T00:00:00Z"), ms("2025-01-01T01:00:00Z"))
    assert jitter_ms(Spec("* * * * *", name="other", jitter=30.0)) != offset
    assert jitter_ms(Spec("* * * * *", name="reports.daily")) == 0


def test_window_applies_to_the_jittered_instant() -> None:
    spec = Spec("0 * * * *", name="j", jitter=600.0)
    fire = ms("2025-01-01T10:00:00Z") + jitter_ms(spec)
    assert jitter_ms(spec) > 0
    assert occurrences_ms(spec, fire - 1, fire) == [fire]
    assert occurrences_ms(spec, fire, fire + 1000) == []


@pytest.mark.parametrize(("expr", "message"), [
    ("61 * * * *", "minute 61 out of range 0-59"),
    ("* 24 * * *", "hour 24 out of range 0-23"),
    ("* * *", "expected 5 fields (6 with seconds first), got 3"),
    ("@sometimes", "unknown alias '@sometimes'"),
    ("*/0 * * * *", "minute step '0' must be a positive number"),
    ("0 0 1W,15 * *", "invalid cron expression"),
])
def test_invalid_expressions(expr: str, message: str) -> None:
    with pytest.raises(ScheduleError, match="^" + re.escape(message)):
        validate_cron(expr)
    with pytest.raises(ScheduleError):
        occurrences_ms(Spec(expr), 0, 86_400_000)


def test_unknown_zone_and_naive_times() -> None:
    with pytest.raises(ScheduleError, match="unknown time zone 'Mars/Base'"):
        occurrences_ms(Spec("* * * * *", "Mars/Base"), 0, 60_000)
    with pytest.raises(ScheduleError, match="time zone is required"):
        next(occurrences(Spec("* * * * *"), datetime(2025, 1, 1), datetime(2025, 1, 2)))


def test_explain_notes() -> None:
    fixed = list(islice(explain(Spec("30 2 * * *", "Europe/Berlin"), utc("2025-03-29T12:00:00Z"),
                                utc("2025-04-01T00:00:00Z")), 1))
    assert fixed[0].note == "moved: 02:30 does not exist (DST gap), runs at 03:00 CEST"
    assert fixed[0].local.isoformat() == "2025-03-30T03:00:00+02:00"
    wild = list(explain(Spec("*/30 2 * * *", "Europe/Berlin"), utc("2025-03-29T12:00:00Z"),
                        utc("2025-03-30T12:00:00Z")))
    assert [(f.runs, f.note) for f in wild] == [
        (False, "skipped: 02:00 does not exist (DST gap)"),
        (False, "skipped: 02:30 does not exist (DST gap)"),
    ]
    repeated = [f.note for f in explain(Spec("30 1 * * *", "America/New_York"),
                                        utc("2025-11-02T00:00:00Z"), utc("2025-11-02T12:00:00Z"))]
    assert repeated == ["repeated hour: runs in the first pass only"]


# -- cronsvc next --------------------------------------------------------------------------

def run_next(*args: str) -> Any:
    return CliRunner().invoke(main, ["next", *args])


def test_next_expression_text() -> None:
    result = run_next("30 2 * * *", "--tz", "Europe/Berlin", "--after", "2025-03-29T12:00:00Z",
                      "-n", "2")
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[1:] == [
        "  2025-03-30 03:00:00 +0200  2025-03-30T01:00:00Z  moved: 02:30 does not exist "
        "(DST gap), runs at 03:00 CEST",
        "  2025-03-31 02:30:00 +0200  2025-03-31T00:30:00Z",
    ]


def test_next_json() -> None:
    result = run_next("*/30 1 * * *", "--tz", "America/New_York",
                      "--after", "2025-11-02T05:15:00Z", "-n", "3", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.output) == [
        {"utc": "2025-11-02T05:30:00Z", "local": "2025-11-02T01:30:00-04:00",
         "note": "repeated hour: first pass"},
        {"utc": "2025-11-02T06:00:00Z", "local": "2025-11-02T01:00:00-05:00",
         "note": "repeated hour: second pass"},
        {"utc": "2025-11-02T06:30:00Z", "local": "2025-11-02T01:30:00-05:00",
         "note": "repeated hour: second pass"},
    ]


def test_next_job_from_file(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(dedent("""\
        jobs:
          backup:
            cron: "30 2 * * *"
            timezone: Europe/Berlin
            command: ["true"]
        """))
    result = run_next("backup", "--config", str(path), "--after", "2025-06-01T00:00:00", "-n", "1",
                      "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.output) == [
        {"utc": "2025-06-01T00:30:00Z", "local": "2025-06-01T02:30:00+02:00"}]
    unknown = run_next("nightly", "--config", str(path))
    assert unknown.exit_code == 1
    assert unknown.stderr == f"{path}: no job named 'nightly', and not a cron expression\n"


@pytest.mark.parametrize(("args", "message"), [
    (["61 * * * *"], "minute 61 out of range 0-59\n"),
    (["* * * * *", "--tz", "Mars/Base"], "unknown time zone 'Mars/Base'\n"),
])
def test_next_errors(args: list[str], message: str) -> None:
    result = run_next(*args)
    assert result.exit_code == 1
    assert result.stderr == message


def test_next_in_a_real_process() -> None:
    done = subprocess.run(
        [sys.executable, "-c", "from cronsvc.cli.main import main; main()", "next", "0 1-3 * * *",
         "--tz", "America/New_York", "--after", "2025-03-09T05:30:00Z", "-n", "2", "--json"],
        capture_output=True, text=True, check=False, timeout=60, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert [f["utc"] for f in json.loads(done.stdout)] == [
        "2025-03-09T06:00:00Z", "2025-03-09T07:00:00Z"]
