"""Calendars: the days a job does not fire, as people name them.

A job's calendar is a tuple of rules, each one string, published with its schedule:

- ``holidays:DE-BY``: the public holidays of a country (ISO code) and, after ``-``, one
  of its subdivisions, as the ``holidays`` package names them;
- ``date:2026-12-24``: one day;
- ``weekends``: Saturdays and Sundays (``business_days: true``).

A fire is skipped when the day it falls on, in the job's zone, matches a rule. The tables
are the ``holidays`` package's, never written here.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from datetime import date

import holidays

HOLIDAYS = "holidays:"
DATE = "date:"
WEEKENDS = "weekends"


def holiday_rule(code: str) -> str:
    """The rule of ``DE`` or ``DE-BY``; ValueError naming what is unknown."""
    country, _, subdiv = code.strip().partition("-")
    try:
        _table(country.upper(), subdiv.upper() or None, 2026)
    except NotImplementedError as exc:
        raise ValueError(f"{code!r}: {exc} (the holidays package's codes, such as DE, "
                         "DE-BY, US-NY, GB-ENG)") from None
    return HOLIDAYS + country.upper() + (f"-{subdiv.upper()}" if subdiv else "")


def date_rule(day: date | str) -> str:
    """The rule of one day; ValueError if it is not a date."""
    value = day if isinstance(day, date) else date.fromisoformat(str(day))
    return DATE + value.isoformat()


def skipped(rules: Iterable[str], day: date) -> str | None:
    """Why ``day`` is skipped (``Christmas Day (DE)``), or None."""
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
