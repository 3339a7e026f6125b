"""Every read of the time, but two.

Scheduling decisions (due checks, lease deadlines) use Redis server time inside
the Lua scripts (``lua/includes/now.lua``). This module serves the rest: the
machine's wall clock (:data:`SYSTEM`, injectable as :class:`FixedClock` in tests),
the Redis server's clock read from Python (:func:`redis_ms`), and the monotonic
clock for durations and deadlines (:func:`monotonic`). The two exceptions:
``run/watchdog.py`` runs as a bare script that imports nothing of cronsvc, and
``process/logs.py`` stamps log lines with the logging module's own clock.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from typing import Any, Protocol


class Clock(Protocol):
    def now_ms(self) -> int: ...


class FleetClock(Protocol):
    """The time the fleet goes by, read from Python, and what a script is given for its
    ``now_ms`` argument (None: the script reads the Redis server's clock itself)."""

    def now_ms(self) -> int: ...

    def script_now(self) -> int | None: ...


class HasTime(Protocol):
    """A Redis client: its ``time()`` is the server's ``TIME``."""

    def time(self) -> Any: ...


class SystemClock:
    """Wall clock of this machine, in milliseconds since the epoch."""

    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000


@dataclass
class FixedClock:
    """A clock that only moves when told to: for tests, where the scripts read it too."""

    ms: int

    def now_ms(self) -> int:
        return self.ms

    def script_now(self) -> int | None:
        """The time a script is given (its ``now_ms`` argument): this clock's."""
        return self.ms

    def advance(self, ms: int) -> None:
        self.ms += ms


SYSTEM = SystemClock()
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


#: Seconds from an arbitrary origin, for measuring durations and deadlines (the function
#: itself: the worker reads it several times per fire).
monotonic = time.monotonic


def redis_ms(client: HasTime) -> int:
    """The Redis server's clock, the one the fleet goes by, in ms since the epoch."""
    sec, usec = client.time()
    return int(sec) * 1000 + int(usec) // 1000


def ms_to_dt(ms: int) -> datetime:
    """Milliseconds since the epoch to an aware UTC datetime (ValueError or
    OverflowError outside the years 1 to 9999)."""
    return datetime.fromtimestamp(ms / 1000, tz=UTC)


def dt_to_ms(dt: datetime) -> int:
    """An aware datetime to milliseconds since the epoch."""
    if dt.tzinfo is None:
        raise ValueError("naive datetime: a time zone is required")
    return (dt - EPOCH) // timedelta(milliseconds=1)


def now_dt(clock: Clock = SYSTEM) -> datetime:
    return ms_to_dt(clock.now_ms())


def parse_iso_ms(text: str) -> int:
    """Milliseconds since the epoch of an ISO 8601 time with a zone (``Z`` or an offset),
    as :func:`iso_utc` writes it; ValueError otherwise."""
    return dt_to_ms(datetime.fromisoformat(text.replace("Z", "+00:00")))


@lru_cache(maxsize=4096)  # a worker's line per run: fires share due times
def iso_utc(ms: int) -> str:
    """ISO 8601 with a Z, millisecond precision only when needed; the raw number for a
    time no calendar holds (a fire id anyone may write into Redis)."""
    try:
        dt = ms_to_dt(ms)
    except (OverflowError, ValueError, OSError):
        return str(ms)
    if ms % 1000:
        return dt.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"
    return dt.strftime("%Y-%m-%dT%H:%M:%SZ")
