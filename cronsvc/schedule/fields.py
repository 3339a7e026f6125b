"""Cron expressions: checking them and parsing them into sets of allowed values.

Syntax is croniter's with ``implement_cron_bug`` (classic day-of-month /
day-of-week OR), plus ``5L`` as another spelling of ``L5``. A sixth field, the
seconds, comes first: ``*/10 * * * * *`` fires every ten seconds.

croniter does the parsing (ranges, steps, names, ``L``, ``W``, ``#``); the
result is turned into plain sets so :mod:`cronsvc.schedule.expand` can enumerate fires
without calling croniter once per fire.
"""

from __future__ import annotations

import calendar
import functools
import re
from dataclasses import dataclass, field

from croniter import croniter

from cronsvc.errors import ScheduleError

MACROS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
ALIASES = frozenset(MACROS)
_FIELDS = (("minute", 0, 59), ("hour", 0, 23), ("day of month", 1, 31), ("month", 1, 12),
           ("day of week", 0, 7))
_SECOND = ("second", 0, 59)
_LAST_WEEKDAY = re.compile(r"\b(\d)L\b", re.IGNORECASE)


def normalize_cron(expr: str) -> str:
    """``expr`` as croniter reads it: single spaces, ``5L`` written ``L5``, macros expanded."""
    text = expr.strip()
    if text.lower() in MACROS:
        return MACROS[text.lower()]
    fields = text.split()
    if len(fields) in (5, 6):
        fields[-1] = _LAST_WEEKDAY.sub(r"L\1", fields[-1])
    return " ".join(fields)


def _check_ranges(fields: list[str]) -> None:
    layout = (_SECOND, *_FIELDS) if len(fields) == 6 else _FIELDS
    for text, (name, low, high) in zip(fields, layout, strict=True):
        for part in text.split(","):
            base, _, step = part.partition("/")
            if step and (not step.isdigit() or int(step) == 0):
                raise ScheduleError(f"{name} step {step!r} must be a positive number")
            # the n of `#n` is an occurrence, not a day: croniter checks it
            for number in re.findall(r"\d+", base.split("#")[0]):
                if not low <= int(number) <= high:
                    raise ScheduleError(f"{name} {int(number)} out of range {low}-{high}")


def _croniter(expr: str) -> croniter:
    text = expr.strip()
    if not text:
        raise ScheduleError("empty cron expression")
    if text.startswith("@"):
        if text.lower() not in ALIASES:
            raise ScheduleError(f"unknown alias {text!r} (use @yearly, @monthly, @weekly, "
                                "@daily or @hourly)")
        return croniter(MACROS[text.lower()], implement_cron_bug=True)
    fields = text.split()
    if len(fields) not in (5, 6):
        raise ScheduleError(f"expected 5 fields (6 with seconds first), got {len(fields)}")
    _check_ranges(fields)
    try:
        return croniter(normalize_cron(text), second_at_beginning=len(fields) == 6,
                        implement_cron_bug=True)
    except (ValueError, KeyError) as exc:
        raise ScheduleError(f"invalid cron expression: {exc}") from None


def validate_cron(expr: str) -> None:
    """Raise ScheduleError (a plain message, e.g. ``minute 61 out of range 0-59``) if bad."""
    _valid(expr)


@functools.lru_cache(maxsize=8192)
def _valid(expr: str) -> None:
    # Cached: a batch of runtime schedules repeats a few thousand expressions at most, and
    # croniter takes a fifth of a millisecond to check one. An error is not cached.
    _croniter(expr)


def nearest_weekday(year: int, month: int, day: int) -> int:
    """Day of the month ``nW`` picks: croniter's rule, never leaving the month."""
    last = calendar.monthrange(year, month)[1]
    day = min(day, last)
    weekday = calendar.weekday(year, month, day)  # 0 = Monday
    if weekday < 5:
        return day
    if weekday == 5:
        return day - 1 if day > 1 else day + 2
    return day + 1 if day < last else day - 2


@dataclass(frozen=True, eq=False)
class CronFields:
    """The allowed values of each field of one expression.

    Weekdays count from 0 = Sunday, as in cron. ``slots_ms`` are the matching
    times of day (hours x minutes x seconds) in milliseconds after midnight,
    ascending.
    """

    expr: str
    slots_ms: tuple[int, ...]
    months: frozenset[int]
    dom: frozenset[int] | None  # None: every day
    dom_last: bool
    dom_nearest: tuple[int, ...]
    dow: frozenset[int] | None  # None: every weekday
    dow_nth: dict[int, frozenset[int]]
    dow_last: frozenset[int]
    day_or: bool  # both day fields restricted: either may match (classic cron)
    fixed: bool  # fixed-time job in the sense of the DST rule
    has_seconds: bool
    _days: dict[tuple[int, int], frozenset[int]] = field(default_factory=dict, repr=False)

    def days(self, year: int, month: int) -> frozenset[int]:
        """Days of ``month`` on which the expression fires (empty if the month is excluded)."""
        key = (year, month)
        found = self._days.get(key)
        if found is None:
            found = self._days[key] = self._compute_days(year, month)
        return found

    def _compute_days(self, year: int, month: int) -> frozenset[int]:
        if month not in self.months:
            return frozenset()
        first_weekday, last = calendar.monthrange(year, month)
        first_dow = (first_weekday + 1) % 7  # calendar counts from Monday, cron from Sunday
        by_dom = {d for d in range(1, last + 1) if self._dom_match(year, month, d, last)}
        by_dow = {d for d in range(1, last + 1)
                  if self._dow_match((first_dow + d - 1) % 7, d, last)}
        return frozenset(by_dom | by_dow if self.day_or else by_dom & by_dow)

    def _dom_match(self, year: int, month: int, day: int, last: int) -> bool:
        if self.dom is None:
            return True
        if day in self.dom or (self.dom_last and day == last):
            return True
        return any(nearest_weekday(year, month, n) == day for n in self.dom_nearest)

    def _dow_match(self, weekday: int, day: int, last: int) -> bool:
        if self.dow is None:
            return True
        if weekday in self.dow_last:
            return day + 7 > last
        if weekday in self.dow_nth:
            return (day - 1) // 7 + 1 in self.dow_nth[weekday]
        return weekday in self.dow


def _values(expanded: list[int | str], low: int, high: int) -> list[int]:
    if "*" in expanded:
        return list(range(low, high + 1))
    return sorted({int(v) for v in expanded})


#: A daily cron at one time of day, ``M H * * *``, written plainly (no leading zeros).
_DAILY = re.compile(r"(0|[1-5]?[0-9]) (0|1?[0-9]|2[0-3]) \* \* \*")


@functools.lru_cache(maxsize=4096)
def parse(expr: str) -> CronFields:
    """Parse ``expr`` (cached: the planner asks for the same few expressions over and over).
    A plain daily one (most runtime schedules: a batch brings a thousand of them) is read
    here without croniter, a fifth of a millisecond each; it parses to the same fields."""
    daily = _DAILY.fullmatch(expr)
    if daily is None:
        return _parsed(expr)
    minute, hour = int(daily[1]), int(daily[2])
    return CronFields(
        expr=expr, slots_ms=((hour * 60 + minute) * 60_000,), months=frozenset(range(1, 13)),
        dom=None, dom_last=False, dom_nearest=(), dow=None, dow_nth={}, dow_last=frozenset(),
        day_or=False, fixed=True, has_seconds=False)


def _parsed(expr: str) -> CronFields:
    """:func:`parse` through croniter."""
    it = _croniter(expr)
    text = normalize_cron(expr)
    fields = text.split()
    has_seconds = len(fields) == 6
    if has_seconds:
        fields = fields[1:]
    minute_f, hour_f, dom_f, _month_f, dow_f = fields
    minutes, hours, dom_x, months_x, dow_x = it.expanded[:5]
    seconds = _values(it.expanded[5], 0, 59) if has_seconds else [0]
    slots = sorted(((h * 60 + m) * 60 + s) * 1000
                   for h in _values(hours, 0, 23)
                   for m in _values(minutes, 0, 59)
                   for s in seconds)
    nth = {int(k): frozenset(v) for k, v in it.nth_weekday_of_month.items()}
    # classic cron: a day field that starts with `*` (or is `?`) leaves the choice to the other
    dom_star = dom_f.startswith(("*", "?"))
    dow_star = dow_f.startswith(("*", "?"))
    nearest = frozenset(it.nearest_weekday)
    # croniter lists the n of `nW` among the plain days too; it is not one
    dom = None if "*" in dom_x else frozenset(
        v for v in dom_x if isinstance(v, int) and v not in nearest)
    return CronFields(
        expr=text,
        slots_ms=tuple(slots),
        months=frozenset(_values(months_x, 1, 12)),
        dom=dom,
        dom_last="l" in dom_x,
        dom_nearest=tuple(sorted(nearest)),
        dow=None if "*" in dow_x else frozenset(int(v) % 7 for v in dow_x),
        dow_nth={d: ns for d, ns in nth.items() if "l" not in ns},
        dow_last=frozenset(d for d, ns in nth.items() if "l" in ns),
        day_or=not dom_star and not dow_star,
        # seconds fields have no cronie precedent: they follow the wall clock (as cronsim)
        fixed=not has_seconds and not minute_f.startswith("*") and not hour_f.startswith("*"),
        has_seconds=has_seconds,
    )
