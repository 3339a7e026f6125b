"""Calendars: the days a job does not fire, as people name them.

A job's calendar is a tuple of rules, each one string, published with its schedule:

- ``holidays:DE-BY``: the public holidays of a country (ISO code) and, after ``-``, one
  of its subdivisions, as the ``holidays`` package names them;
- ``date:2026-12-24``: one day;
- ``weekends``: Saturdays and Sundays (``business_days: true``);
- ``first_business_day`` / ``last_business_day``: every day but the first (last) of its
  month that no other rule skips and that is not a weekend (``on: last_business_day``).

A fire is skipped when the day it falls on, in the job's zone, matches a rule. The tables
are the ``holidays`` package's, never written here.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from datetime import date, timedelta

import holidays

HOLIDAYS = "holidays:"
DATE = "date:"
WEEKENDS = "weekends"
FIRST_BUSINESS_DAY = "first_business_day"
LAST_BUSINESS_DAY = "last_business_day"
PICKS = (FIRST_BUSINESS_DAY, LAST_BUSINESS_DAY)


def holiday_rule(code: str) -> str:
    """The rule of ``DE`` or ``DE-BY``; ValueError naming what is unknown."""
    country, _, subdiv = code.strip().partition("-")
    try:
        _table(country.upper(), subdiv.upper() or None, 2026)
    except NotImplementedError as exc:
        raise ValueError(f"{code!r}: {exc} (the holidays package's codes, such as DE, "
                         "DE-BY, US-NY, GB-ENG)") from None
    return HOLIDAYS + country.upper() + (f"-{subdiv.upper()}" if subdiv else "")


def mapping_rules(spec: object) -> tuple[str, ...]:
    """The rules of ``{holidays: CODE or [CODE...], dates: [YYYY-MM-DD...]}``; ValueError
    ``(field, problem)`` args otherwise (field ``holidays``, ``dates``, or '' for the
    whole)."""
    if not isinstance(spec, dict) or not spec or set(spec) - {"holidays", "dates"}:
        raise ValueError("", "expected {holidays: CODE or [CODE...], dates: [YYYY-MM-DD...]}")
    rules = []
    codes = spec.get("holidays") or []
    for code in [codes] if isinstance(codes, str) else codes:
        try:
            rules.append(holiday_rule(str(code)))
        except ValueError as exc:
            raise ValueError("holidays", str(exc)) from None
    for day in spec.get("dates") or []:
        try:
            rules.append(date_rule(day))
        except ValueError:
            raise ValueError("dates", f"{day!r}: expected a date YYYY-MM-DD") from None
    return tuple(rules)


def day_rules(skip: tuple[str, ...], business_days: bool, only: str | None) -> tuple[str, ...]:
    """A job's whole calendar: its skip rules, weekends, then the one-day-a-month pick."""
    rules = (*skip, WEEKENDS) if business_days else skip
    if only is not None and only not in PICKS:
        raise ValueError(f"{only!r}: one of {', '.join(PICKS)}")
    return (*rules, only) if only else rules


def rule_fields(rules: Iterable[str]) -> dict[str, object]:
    """The ``skip``, ``business_days`` and ``only`` that :func:`day_rules` makes ``rules``
    of: a calendar written back as a schedule's fields, to change its other fields."""
    rules = tuple(rules)
    codes = [r[len(HOLIDAYS):] for r in rules if r.startswith(HOLIDAYS)]
    dates = [r[len(DATE):] for r in rules if r.startswith(DATE)]
    skip = {k: v for k, v in (("holidays", codes), ("dates", dates)) if v}
    return {"skip": skip or None, "business_days": WEEKENDS in rules,
            "only": next((r for r in rules if r in PICKS), None)}


def date_rule(day: date | str) -> str:
    """The rule of one day; ValueError if it is not a date."""
    value = day if isinstance(day, date) else date.fromisoformat(str(day))
    return DATE + value.isoformat()


def skipped(rules: Iterable[str], day: date) -> str | None:
    """Why ``day`` is skipped (``Christmas Day (DE)``), or None."""
    rules = tuple(rules)
    why = _skipped_by_days(rules, day)
    if why is not None:
        return why
    for pick in (r for r in rules if r in PICKS):
        step = -1 if pick == FIRST_BUSINESS_DAY else 1
        other = day + timedelta(days=step)
        while other.month == day.month:
            if other.weekday() < 5 and _skipped_by_days(rules, other) is None:
                return f"not the {pick.replace('_', ' ')} of the month"
            other += timedelta(days=step)
    return None


def quiet(rules: Iterable[str], why: str | None) -> bool:
    """A skip not worth showing: with ``only: last_business_day``, every other day of the
    month is skipped, and saying so of each would bury the holidays that moved the pick."""
    return why is not None and any(r in PICKS for r in rules) and (
        why == "weekend" or why.startswith("not the "))


def words(rules: Iterable[str]) -> str:
    """The calendar in words, after the schedule's: ``on business days except the holidays
    of DE-BY``."""
    rules = tuple(rules)
    out = []
    for pick in (r for r in rules if r in PICKS):
        out.append(f"only on the {pick.replace('_', ' ')} of the month")
    if WEEKENDS in rules and not out:
        out.append("on business days")
    codes = [r[len(HOLIDAYS):] for r in rules if r.startswith(HOLIDAYS)]
    dates = [r for r in rules if r.startswith(DATE)]
    if codes:
        out.append(f"except the holidays of {', '.join(codes)}")
    if dates:
        out.append(f"except {len(dates)} listed day{'' if len(dates) == 1 else 's'}")
    return ", ".join(out)


def _skipped_by_days(rules: tuple[str, ...], day: date) -> str | None:
    if any(r in PICKS for r in rules) and day.weekday() >= 5:
        return "weekend"
    for rule in rules:
        if rule == WEEKENDS and day.weekday() >= 5:
            return "weekend"
        if rule.startswith(DATE) and rule[len(DATE):] == day.isoformat():
            return f"{day.isoformat()} in the calendar"
        if rule.startswith(HOLIDAYS):
            country, _, subdiv = rule[len(HOLIDAYS):].partition("-")
            name = _table(country, subdiv or None, day.year).get(day)
            if name is not None:
                return f"{name} ({rule[len(HOLIDAYS):]})"
    return None


@functools.lru_cache(maxsize=512)
def _table(country: str, subdiv: str | None, year: int) -> dict[date, str]:
    return dict(holidays.country_holidays(country, subdiv=subdiv, years=year).items())
