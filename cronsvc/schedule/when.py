"""WHEN of ``cronsvc at`` (an ISO 8601 time, ``+10m`` from now, or ``now``), the ends of a
``cronsvc backfill`` range, and the range
of times a one-off run may have (``at``, ``trigger``, ``Client.enqueue``)."""

from __future__ import annotations

from datetime import datetime

from cronsvc.clock import dt_to_ms
from cronsvc.durations import HINT, parse_duration
from cronsvc.schedule.expand import zone

# A time this far in the past is a mistake, not "as soon as possible".
PAST_SLACK_MS = 1000
#: One-off runs are at most this many years from now: a slip such as ``+3000000d``
#: is refused instead of queueing a fire no calendar can show (past the year 9999).
RANGE_YEARS = 10
RANGE_MS = RANGE_YEARS * 36_525 * 864_000  # 365.25 days a year


def range_problem(due_ms: int, now_ms: int) -> str | None:
    """Why ``due_ms`` cannot be the time of a one-off run at ``now_ms``, else None."""
    if due_ms > now_ms + RANGE_MS:
        return f"is more than {RANGE_YEARS} years ahead"
    if due_ms < now_ms - RANGE_MS:
        return f"is more than {RANGE_YEARS} years ago"
    return None


def due_problem(due_ms: int, now_ms: int) -> str | None:
    """Why a one-off run cannot be due at ``due_ms`` at ``now_ms`` (out of range, or in
    the past), else None: the one rule of ``cronsvc at``, the API and the Client."""
    problem = range_problem(due_ms, now_ms)
    if problem is None and due_ms < now_ms - PAST_SLACK_MS:
        return "is in the past"
    return problem


def parse_when(text: str, now_ms: int, tz: str | None = None) -> int:
    """ms since the epoch for ``text``; ValueError with a plain message if it is not a time.

    ``+30s``, ``+10m``, ``+2h``, ``+1d``, ``+1h30m``: from ``now_ms`` (the Redis clock).
    ISO 8601 (``2030-01-31T09:00``, ``...Z``, ``...+01:00``): without an offset it is
    read in ``tz``, else UTC. Times in the past (``-5m`` too) are refused, and so are
    times more than :data:`RANGE_YEARS` years ahead.
    """
    value = text.strip()
    if value.lower() == "now":
        return now_ms
    if value[:1] in ("+", "-"):
        try:
            seconds = parse_duration(value[1:])
        except ValueError:
            raise ValueError(f"{text!r}: not a delay ({HINT}, after '+')") from None
        if value[0] == "-":
            raise ValueError(f"{text!r} is in the past")
        # Checked before the product: a delay of 1e308 seconds is no int.
        if seconds * 1000 > RANGE_MS:
            raise ValueError(f"{text!r} is more than {RANGE_YEARS} years ahead")
        return now_ms + round(seconds * 1000)
    due = _iso_ms(text, tz, "+10m")
    problem = due_problem(due, now_ms)
    if problem:
        raise ValueError(f"{text!r} {problem}")
    return due


def parse_past(text: str, now_ms: int, tz: str | None = None) -> int:
    """ms since the epoch for an end of a range in the past (``cronsvc backfill``): ISO 8601
    (a date alone is its midnight; without an offset it is read in ``tz``, else UTC),
    ``now``, or ``-6h`` / ``-2d`` before ``now_ms``."""
    value = text.strip()
    if value.lower() == "now":
        return now_ms
    if value[:1] == "-":
        try:
            seconds = parse_duration(value[1:])
        except ValueError:
            raise ValueError(f"{text!r}: not a delay ({HINT}, after '-')") from None
        if seconds * 1000 > RANGE_MS:
            raise ValueError(f"{text!r} is more than {RANGE_YEARS} years ago")
        return now_ms - round(seconds * 1000)
    return _iso_ms(text, tz, "-6h")


def _iso_ms(text: str, tz: str | None, delay: str) -> int:
    try:
        parsed = datetime.fromisoformat(text.strip())
    except ValueError:
        raise ValueError(f"{text!r}: not an ISO 8601 time (e.g. 2030-01-31T09:00, "
                         f"2030-01-31T09:00:00+01:00) nor a delay such as {delay}") from None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=zone(tz or "UTC"))
    return dt_to_ms(parsed)
