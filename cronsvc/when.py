"""WHEN of ``cronsvc at``: an ISO 8601 time, ``+10m`` from now, or ``now``."""

from __future__ import annotations

from datetime import datetime

from .clock import dt_to_ms
from .durations import HINT, parse_duration
from .schedule import zone

# A time this far in the past is a mistake, not "as soon as possible".
PAST_SLACK_MS = 1000


def parse_when(text: str, now_ms: int, tz: str | None = None) -> int:
    """ms since the epoch for ``text``; ValueError with a plain message if it is not a time.

    ``+30s``, ``+10m``, ``+2h``, ``+1d``, ``+1h30m``: from ``now_ms`` (the Redis clock).
    ISO 8601 (``2030-01-31T09:00``, ``...Z``, ``...+01:00``): without an offset it is
    read in ``tz``, else UTC. Times in the past are refused.
    """
    value = text.strip()
    if value.lower() == "now":
        return now_ms
    if value.startswith("+"):
        try:
            return now_ms + round(parse_duration(value[1:]) * 1000)
        except ValueError:
            raise ValueError(f"{text!r}: not a delay ({HINT}, after '+')") from None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise ValueError(f"{text!r}: not an ISO 8601 time (e.g. 2030-01-31T09:00, "
                         "2030-01-31T09:00:00+01:00) nor a delay such as +10m") from None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=zone(tz or "UTC"))
    due = dt_to_ms(parsed)
    if due < now_ms - PAST_SLACK_MS:
        raise ValueError(f"{text!r} is in the past")
    return due
