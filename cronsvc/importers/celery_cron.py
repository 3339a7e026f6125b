"""A Celery ``crontab`` as the cron expression that fires at the same minutes.

Celery parses each field itself (``mon-fri``, ``*/15``, lists of ints, wrap-around
ranges such as ``hour='22-2'``) and keeps the expanded sets. Each field is written as the
user wrote it when cronsvc reads that text as the same set, else as the set itself
(``22-23,0-2``), so the expression is exact by construction. Weekdays count from
0 = Sunday in both.

One difference cannot be written: Celery fires on the days that match day_of_month *and*
day_of_week, cron on the days that match either when both are restricted. Such a crontab
is refused.
"""

from __future__ import annotations

from typing import Any

from cronsvc.errors import ScheduleError
from cronsvc.schedule.fields import parse

#: Celery's attribute, and the range of its values.
FIELDS = (("minute", 0, 59), ("hour", 0, 23), ("day_of_month", 1, 31),
          ("month_of_year", 1, 12), ("day_of_week", 0, 6))


def celery_cron(tab: Any) -> tuple[str | None, str | None]:
    """``(expression, None)`` for the Celery crontab ``tab``, or ``(None, why not)``."""
    texts = []
    for attr, low, high in FIELDS:
        wanted = frozenset(getattr(tab, attr))
        if wanted == frozenset(range(low, high + 1)):
            texts.append("*")
            continue
        written = getattr(tab, f"_orig_{attr}")
        text = str(written).replace(" ", "") if isinstance(written, str | int) else None
        texts.append(text if text and field_values(attr, text) == wanted else compact(wanted))
    expr = " ".join(texts)
    if parse(expr).day_or:
        return None, ("day_of_month and day_of_week are both set: Celery fires on the days "
                      "matching both, cron on the days matching either; refused rather than "
                      "fire on other days (keep one, and filter in the task)")
    return expr, None


def field_values(attr: str, text: str) -> frozenset[int] | None:
    """The values cronsvc reads ``text`` as, in the field Celery calls ``attr``; None if
    it does not read it, or reads more than plain values (``L``, ``W``, ``#``)."""
    probe = {"minute": f"{text} 0 * * *", "hour": f"0 {text} * * *",
             "day_of_month": f"0 0 {text} * *", "month_of_year": f"0 0 * {text} *",
             "day_of_week": f"0 0 * * {text}"}[attr]
    try:
        fields = parse(probe)
    except ScheduleError:
        return None
    if fields.dom_last or fields.dom_nearest or fields.dow_nth or fields.dow_last:
        return None
    if attr == "minute":
        return frozenset(ms // 60_000 % 60 for ms in fields.slots_ms)
    if attr == "hour":
        return frozenset(ms // 3_600_000 for ms in fields.slots_ms)
    if attr == "day_of_month":
        return fields.dom if fields.dom is not None else frozenset(range(1, 32))
    if attr == "month_of_year":
        return fields.months
    return fields.dow if fields.dow is not None else frozenset(range(7))


def compact(values: frozenset[int]) -> str:
    """``{1, 2, 3, 5}`` as ``1-3,5``."""
    runs: list[list[int]] = []
    for value in sorted(values):
        if runs and value == runs[-1][1] + 1:
            runs[-1][1] = value
        else:
            runs.append([value, value])
    return ",".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)
