"""Cron expressions: checking them (expansion lives here too).

Syntax is croniter's with ``implement_cron_bug`` (classic day-of-month /
day-of-week OR), plus ``5L`` as another spelling of ``L5``. A sixth field, the
seconds, comes first: ``*/10 * * * * *`` fires every ten seconds.
"""

from __future__ import annotations

import re

from croniter import croniter

from .errors import ScheduleError

ALIASES = frozenset({"@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight",
                     "@hourly"})
_FIELDS = (("minute", 0, 59), ("hour", 0, 23), ("day of month", 1, 31), ("month", 1, 12),
           ("day of week", 0, 7))
_SECOND = ("second", 0, 59)
_LAST_WEEKDAY = re.compile(r"\b(\d)L\b", re.IGNORECASE)


def normalize_cron(expr: str) -> str:
    """``expr`` as croniter reads it: single spaces, ``5L`` written ``L5``."""
    fields = expr.split()
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


def validate_cron(expr: str) -> None:
    """Raise ScheduleError (a plain message, e.g. ``minute 61 out of range 0-59``) if bad."""
    text = expr.strip()
    if not text:
        raise ScheduleError("empty cron expression")
    if text.startswith("@"):
        if text.lower() not in ALIASES:
            raise ScheduleError(f"unknown alias {text!r} (use @yearly, @monthly, @weekly, "
                                "@daily or @hourly)")
        return
    fields = text.split()
    if len(fields) not in (5, 6):
        raise ScheduleError(f"expected 5 fields (6 with seconds first), got {len(fields)}")
    _check_ranges(fields)
    try:
        croniter(normalize_cron(text), second_at_beginning=len(fields) == 6,
                 implement_cron_bug=True)
    except (ValueError, KeyError) as exc:
        raise ScheduleError(f"invalid cron expression: {exc}") from None
