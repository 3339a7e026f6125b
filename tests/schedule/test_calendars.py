"""Holiday and business-day calendars: the days each rule skips (the ``holidays``
package's tables for three countries, 2026 and 2027), a holiday on a weekend, a business
day on a DST night, and the fires a calendar keeps out of the plan; a calendar written
back as the fields it was made of."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

import pytest

from cronsvc.config.models import parse_config
from cronsvc.errors import ConfigError
from cronsvc.schedule.calendars import (
    day_rules,
    holiday_rule,
    mapping_rules,
    rule_fields,
    skipped,
)
from cronsvc.schedule.expand import explain, occurrences_ms

HOLIDAYS = {
    ("DE", 2026): ["01-01", "04-03", "04-06", "05-01", "05-14", "05-25", "10-03", "12-25",
                   "12-26"],
    ("DE", 2027): ["01-01", "03-26", "03-29", "05-01", "05-06", "05-17", "10-03", "12-25",
                   "12-26"],
    # Independence Day on a Saturday: observed on the Friday before
    ("US", 2026): ["01-01", "01-19", "02-16", "05-25", "06-19", "07-03", "07-04", "09-07",
                   "10-12", "11-11", "11-26", "12-25"],
    ("US", 2027): ["01-01", "01-18", "02-15", "05-31", "06-18", "06-19", "07-04", "07-05",
                   "09-06", "10-11", "11-11", "11-25", "12-24", "12-25", "12-31"],
    # Boxing Day on a Saturday: the bank holiday is the Monday after
    ("GB-ENG", 2026): ["01-01", "04-03", "04-06", "05-04", "05-25", "08-31", "12-25", "12-26",
                       "12-28"],
    ("GB-ENG", 2027): ["01-01", "03-26", "03-29", "05-03", "05-31", "08-30", "12-25", "12-26",
                       "12-27", "12-28"],
}


@pytest.mark.parametrize(("code", "year"), sorted(HOLIDAYS))
def test_the_days_a_country_s_holidays_skip(code: str, year: int) -> None:
    rule = holiday_rule(code)
    days = [date(year, 1, 1) + timedelta(days=n) for n in range(366)]
    found = [d.strftime("%m-%d") for d in days if d.year == year and skipped([rule], d)]
    assert found == HOLIDAYS[code, year]


def test_a_holiday_on_a_weekend_is_named_as_the_holiday() -> None:
    rules = [holiday_rule("US"), "weekends"]
    assert skipped(rules, date(2026, 7, 4)) == "Independence Day (US)"  # a Saturday
    assert skipped(rules, date(2026, 7, 3)) == "Independence Day (observed) (US)"
    assert skipped(rules, date(2026, 7, 5)) == "weekend"
    assert skipped(rules, date(2026, 7, 6)) is None


def calendar_job(text: str) -> object:
    config = parse_config("calendars:\n  bavaria: {holidays: DE-BY, dates: [2026-12-24]}\n"
                          "jobs:\n  j:\n" + text, "s.yaml")
    return config.jobs["j"]


def test_skipped_fires_are_not_planned_and_next_shows_why() -> None:
    job = calendar_job("    cron: '0 7 * * *'\n    timezone: Europe/Berlin\n"
                       "    command: [report]\n    skip: bavaria\n    business_days: true\n")
    lo = int(datetime(2026, 12, 21, 12, tzinfo=UTC).timestamp() * 1000)
    hi = int(datetime(2026, 12, 29, 12, tzinfo=UTC).timestamp() * 1000)
    days = [datetime.fromtimestamp(ms / 1000, UTC).strftime("%m-%d")
            for ms in occurrences_ms(job, lo, hi)]
    assert days == ["12-22", "12-23", "12-28", "12-29"]
    notes = {f.local.strftime("%m-%d"): f.note for f in explain(
        job, datetime(2026, 12, 23, 12, tzinfo=UTC), datetime(2026, 12, 28, tzinfo=UTC))
        if not f.runs}
    assert notes == {"12-24": "skipped: 2026-12-24 in the calendar",
                     "12-25": "skipped: Christmas Day (DE-BY)",
                     "12-26": "skipped: Second Day of Christmas (DE-BY)",
                     "12-27": "skipped: weekend"}


def test_a_business_day_on_a_dst_night_runs_at_the_transition() -> None:
    # Israel springs forward on the Friday before the last Sunday of March: a business day.
    job = calendar_job("    cron: '30 2 * * *'\n    timezone: Asia/Jerusalem\n"
                       "    command: [x]\n    business_days: true\n")
    fires = [(f.utc, f.note, f.runs) for f in explain(
        job, datetime(2027, 3, 25, 12, tzinfo=UTC), datetime(2027, 3, 28, 12, tzinfo=UTC))]
    assert fires == [
        (datetime(2027, 3, 26, 0, 0, tzinfo=UTC),
         "moved: 02:30 does not exist (DST gap), runs at 03:00 IDT", True),
        (datetime(2027, 3, 26, 23, 30, tzinfo=UTC), "skipped: weekend", False),
        (datetime(2027, 3, 27, 23, 30, tzinfo=UTC), "skipped: weekend", False)]


def test_a_calendar_is_part_of_the_schedule_digest() -> None:
    plain = calendar_job("    cron: '0 7 * * *'\n    command: [x]\n")
    holiday = calendar_job("    cron: '0 7 * * *'\n    command: [x]\n    skip: bavaria\n")
    assert plain.digest != holiday.digest and plain.spec.get("calendar") is None
    assert holiday.spec["calendar"] == ["holidays:DE-BY", "date:2026-12-24"]


def test_calendar_mistakes_are_located() -> None:
    with pytest.raises(ConfigError) as bad:
        parse_config("calendars:\n  plant: {holidays: XX}\n  office: {dates: [2026-13-01]}\n"
                     "jobs:\n  a:\n    cron: '@daily'\n    command: [x]\n    skip: bavaria\n"
                     "  b:\n    cron: '@daily'\n    command: [x]\n    skip: {holiday: DE}\n",
                     "s.yaml")
    assert bad.value.problems == [
        "s.yaml:2: calendars.plant.holidays: 'XX': Country XX not available (the holidays "
        "package's codes, such as DE, DE-BY, US-NY, GB-ENG)",
        "s.yaml:3: calendars.office.dates: '2026-13-01': expected a date YYYY-MM-DD",
        "s.yaml:8: jobs.a.skip: unknown calendar 'bavaria' (declared under calendars: none; "
        "or write {holidays: DE-BY, dates: [...]})",
        "s.yaml:12: jobs.b.skip: expected {holidays: CODE or [CODE...], dates: "
        "[YYYY-MM-DD...]} or a calendar's name"]


def test_only_the_first_or_last_business_day_of_each_month() -> None:
    from cronsvc.schedule.words import describe_schedule

    last = parse_config("jobs:\n  close:\n    cron: '0 18 * * *'\n    only: last_business_day\n"
                        "    timezone: Europe/London\n    command: [x]\n"
                        "    skip: {holidays: GB-ENG}\n", "s.yaml").jobs["close"]
    lo = int(datetime(2026, 7, 1, tzinfo=UTC).timestamp() * 1000)
    hi = int(datetime(2026, 10, 1, tzinfo=UTC).timestamp() * 1000)
    days = [datetime.fromtimestamp(ms / 1000, UTC).strftime("%m-%d")
            for ms in occurrences_ms(last, lo, hi)]
    # 2026-08-31, the last weekday of August, is the summer bank holiday
    assert days == ["07-31", "08-28", "09-30"]
    assert describe_schedule(last.schedule).endswith(
        "only on the last business day of the month, except the holidays of GB-ENG")
    first = parse_config("jobs:\n  open:\n    cron: '0 7 * * *'\n    only: first_business_day\n"
                         "    command: [x]\n    skip: {holidays: DE}\n", "s.yaml").jobs["open"]
    lo = int(datetime(2026, 12, 15, tzinfo=UTC).timestamp() * 1000)
    hi = int(datetime(2027, 2, 15, tzinfo=UTC).timestamp() * 1000)
    days = [datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d")
            for ms in occurrences_ms(first, lo, hi)]
    assert days == ["2027-01-04", "2027-02-01"]  # January 1st is a holiday, then a weekend
    with pytest.raises(ConfigError, match="only: last_business_day picks among the days"):
        parse_config("jobs:\n  x:\n    every: 1h\n    only: last_business_day\n"
                     "    command: [x]\n", "s.yaml")


def test_a_runtime_schedule_takes_a_calendar_and_keeps_it_stored() -> None:
    from cronsvc.errors import BadSchedule
    from cronsvc.schedule.runtime import build, parse_stored, plan_window

    s = build("tenant-7:report", job="report", now_ms=0, cron="0 7 * * *",
              timezone="Europe/Berlin", skip={"holidays": "DE-BY"}, business_days=True)
    again = parse_stored(s.id, s.stored())
    assert again.calendar == ("holidays:DE-BY", "weekends") == s.calendar
    lo = int(datetime(2026, 12, 24, tzinfo=UTC).timestamp() * 1000)
    hi = int(datetime(2026, 12, 29, tzinfo=UTC).timestamp() * 1000)
    dues, _ = plan_window(again.spec, lo, hi)
    assert [datetime.fromtimestamp(d / 1000, UTC).strftime("%m-%d") for d in dues] == [
        "12-24", "12-28"]
    with pytest.raises(BadSchedule, match=r"skip\.holidays: 'XX'"):
        build("x", job="report", now_ms=0, cron="@daily", skip={"holidays": "XX"})
    with pytest.raises(BadSchedule, match="only: .* set cron too"):
        build("x", job="report", now_ms=0, every="1h", only="last_business_day")


@pytest.mark.parametrize(("skip", "business_days", "only"), [
    (None, False, None),
    ({"holidays": ["DE-BY", "US"], "dates": ["2026-12-24"]}, True, "last_business_day"),
    ({"dates": ["2027-01-02"]}, False, "first_business_day"),
])
def test_a_calendar_reads_back_as_the_fields_it_was_made_of(
        skip: dict[str, list[str]] | None, business_days: bool, only: str | None) -> None:
    rules = day_rules(mapping_rules(skip) if skip else (), business_days, only)
    assert rule_fields(rules) == {"skip": skip, "business_days": business_days, "only": only}
