"""Cron expressions checked and parsed into sets (cronsvc.schedule.fields): good and bad
expressions with their messages, the text croniter is handed, and the parsed fields."""

from __future__ import annotations

import re

import pytest

from cronsvc.errors import ScheduleError
from cronsvc.schedule.fields import (
    ALIASES,
    MACROS,
    _parsed,
    nearest_weekday,
    normalize_cron,
    parse,
    validate_cron,
)

HOUR_MS = 3_600_000


@pytest.mark.parametrize("expr", [
    "* * * * *", "*/5 * * * *", "0 0 L * *", "0 0 15W * *", "0 22 * * 5L", "0 22 * * L5",
    "0 0 * * 1#2", "0 0 * * MON-FRI", "0 0 1 JAN *", "59 23 31 12 7", "0 0 ? * 1",
    "*/10 * * * * *", "59 59 23 31 12 7", "  0   0 * * *  ", "@yearly", "@annually",
    "@monthly", "@weekly", "@daily", "@midnight", "@hourly", "@DAILY",
])
def test_good_expressions(expr: str) -> None:
    validate_cron(expr)


# Messages of cronsvc's own checks, whole.
@pytest.mark.parametrize(("expr", "message"), [
    ("", "empty cron expression"),
    ("   ", "empty cron expression"),
    ("60 * * * *", "minute 60 out of range 0-59"),
    ("* 24 * * *", "hour 24 out of range 0-23"),
    ("* * 0 * *", "day of month 0 out of range 1-31"),
    ("* * 32 * *", "day of month 32 out of range 1-31"),
    ("* * * 0 *", "month 0 out of range 1-12"),
    ("* * * 13 *", "month 13 out of range 1-12"),
    ("* * * * 8", "day of week 8 out of range 0-7"),
    ("0 0 * * 9L", "day of week 9 out of range 0-7"),
    ("60 * * * * *", "second 60 out of range 0-59"),
    ("0 60 * * * *", "minute 60 out of range 0-59"),  # six fields: the seconds come first
    ("1-70 * * * *", "minute 70 out of range 0-59"),
    ("* * *", "expected 5 fields (6 with seconds first), got 3"),
    ("* * * * * * *", "expected 5 fields (6 with seconds first), got 7"),
    ("@sometimes", "unknown alias '@sometimes' (use @yearly, @monthly, @weekly, @daily or "
                   "@hourly)"),
    ("@reboot", "unknown alias '@reboot' (use @yearly, @monthly, @weekly, @daily or @hourly)"),
    ("*/0 * * * *", "minute step '0' must be a positive number"),
    ("5/0 * * * *", "minute step '0' must be a positive number"),
    ("*/x * * * *", "minute step 'x' must be a positive number"),
    ("* */0 * * *", "hour step '0' must be a positive number"),
])
def test_bad_expressions(expr: str, message: str) -> None:
    with pytest.raises(ScheduleError) as caught:
        validate_cron(expr)
    assert str(caught.value) == message


# What croniter refuses: the prefix is ours, the rest croniter's own words.
@pytest.mark.parametrize("expr", [
    "a * * * *", "-1 * * * *", "1-/2 * * * *", "1,,2 * * * *", "* * * foo *",
    "0 0 1W,15 * *", "0 0 * * 1#6",
])
def test_expressions_croniter_refuses(expr: str) -> None:
    with pytest.raises(ScheduleError, match="^" + re.escape("invalid cron expression: ")):
        validate_cron(expr)
    with pytest.raises(ScheduleError):
        parse(expr)


@pytest.mark.parametrize(("expr", "normal"), [
    ("  */5   *  * * *  ", "*/5 * * * *"),
    ("0 22 * * 5L", "0 22 * * L5"),
    ("0 22 * * 5l", "0 22 * * L5"),
    ("0 5L * * 1L", "0 5L * * L1"),  # only the day of week says nL
    ("5L * * * *", "5L * * * *"),
    ("0 0 * *", "0 0 * *"),  # not 5 or 6 fields: left for validate_cron to refuse
    ("@HOURLY", "0 * * * *"),
    ("@midnight", "0 0 * * *"),
    ("@daily", "0 0 * * *"),
    ("@weekly", "0 0 * * 0"),
    ("@monthly", "0 0 1 * *"),
    ("@yearly", "0 0 1 1 *"),
    ("@annually", "0 0 1 1 *"),
])
def test_normalize_cron(expr: str, normal: str) -> None:
    assert normalize_cron(expr) == normal


def test_every_alias_expands_to_five_fields() -> None:
    assert ALIASES == frozenset(MACROS)
    assert all(len(normalize_cron(alias).split()) == 5 for alias in ALIASES)


ALL_MONTHS = frozenset(range(1, 13))


@pytest.mark.parametrize(("expr", "fields"), [
    ("30 2 * * *", dict(slots_ms=(2 * HOUR_MS + 30 * 60_000,), dom=None, dow=None,
                        day_or=False, fixed=True, has_seconds=False)),
    ("*/15 9-10 * * *", dict(slots_ms=tuple(h * HOUR_MS + m * 60_000 for h in (9, 10)
                                            for m in (0, 15, 30, 45)), fixed=False)),
    ("0 0 L * *", dict(dom=frozenset(), dom_last=True, dow=None)),
    ("0 0 15W * *", dict(dom=frozenset(), dom_nearest=(15,), dom_last=False)),
    ("0 22 * * 5L", dict(expr="0 22 * * L5", dow=frozenset({5}), dow_last=frozenset({5}),
                         dow_nth={})),
    ("0 0 * * 1#2", dict(dow=frozenset({1}), dow_nth={1: frozenset({2})},
                         dow_last=frozenset())),
    ("0 0 1 * 1", dict(dom=frozenset({1}), dow=frozenset({1}), day_or=True)),
    ("0 0 */2 * 1", dict(dom=frozenset(range(1, 32, 2)), dow=frozenset({1}), day_or=False)),
    ("0 0 ? * 1", dict(dom=None, dow=frozenset({1}), day_or=False)),
    ("0 0 * * 7", dict(dow=frozenset({0}))),  # 7 is Sunday, as 0
    ("0 0 * * MON-FRI", dict(dow=frozenset({1, 2, 3, 4, 5}))),
    ("0 0 * 6-8 *", dict(months=frozenset({6, 7, 8}))),
    ("0 0 1 JAN,jul *", dict(months=frozenset({1, 7}), dom=frozenset({1}))),
    ("@hourly", dict(expr="0 * * * *", slots_ms=tuple(h * HOUR_MS for h in range(24)),
                     months=ALL_MONTHS, fixed=False)),
    ("*/20 * * * * *", dict(slots_ms=tuple(range(0, 86_400_000, 20_000)), has_seconds=True,
                            fixed=False)),
    ("0 30 2 * * *", dict(slots_ms=(2 * HOUR_MS + 30 * 60_000,), has_seconds=True,
                          fixed=False)),  # seconds follow the wall clock, never "fixed"
])
def test_parse(expr: str, fields: dict[str, object]) -> None:
    parsed = parse(expr)
    assert {name: getattr(parsed, name) for name in fields} == fields


def test_a_plain_daily_expression_parses_as_croniter_reads_it() -> None:
    names = [f for f in parse("0 0 * * *").__dataclass_fields__ if f != "_days"]
    daily = [f"{m} {h} * * *" for h in range(24) for m in range(60)]
    for expr in daily:
        fast, slow = parse(expr), _parsed(expr)
        assert {n: getattr(fast, n) for n in names} == {n: getattr(slow, n) for n in names}
        assert fast.days(2025, 2) == slow.days(2025, 2)
    # leading zeros, other spacing, out of range: croniter's way, its errors
    assert parse("05 09 * * *").slots_ms == parse("5 9 * * *").slots_ms
    assert parse(" 5  9 * * * ").expr == "5 9 * * *"
    for bad in ("60 1 * * *", "1 24 * * *"):
        with pytest.raises(ScheduleError, match="out of range"):
            parse(bad)


@pytest.mark.parametrize(("expr", "year", "month", "days"), [
    ("0 0 L * *", 2024, 2, [29]),
    ("0 0 L * *", 2025, 2, [28]),
    ("0 0 15W * *", 2025, 2, [14]),  # Saturday the 15th: Friday
    ("0 0 15W * *", 2025, 6, [16]),  # Sunday the 15th: Monday
    ("0 22 * * 5L", 2025, 1, [31]),
    ("0 0 * * 1#2", 2025, 6, [9]),
    ("0 0 1 * 1", 2025, 9, [1, 8, 15, 22, 29]),  # both restricted: either matches
    ("0 0 */2 * 1", 2025, 9, [1, 15, 29]),  # a field starting with *: both must match
    ("0 0 * 6-8 *", 2025, 5, []),
    ("0 0 31 * *", 2025, 4, []),
])
def test_days_of_a_month(expr: str, year: int, month: int, days: list[int]) -> None:
    assert sorted(parse(expr).days(year, month)) == days


@pytest.mark.parametrize(("year", "month", "day", "nearest"), [
    (2025, 2, 1, 3),  # Saturday the 1st: Monday the 3rd, not the month before
    (2025, 3, 1, 3),
    (2025, 3, 31, 31),  # a Monday
    (2025, 5, 31, 30),  # Saturday the 31st: Friday
    (2025, 8, 31, 29),  # Sunday the 31st: Friday, not the month after
    (2025, 2, 31, 28),  # past the end: the last day
    (2025, 6, 14, 13),
    (2025, 6, 15, 16),
])
def test_nearest_weekday(year: int, month: int, day: int, nearest: int) -> None:
    assert nearest_weekday(year, month, day) == nearest
