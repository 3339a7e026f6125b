"""When the claim loop wakes: the moment the Redis server's clock reaches the next due
time, on this process's monotonic clock, to a fraction of a ms.

The claim script gives the server's time in whole ms (truncated): a sleep timed from it
alone ends half a ms late on average, up to a whole one. ``TIME`` gives µs; read every
few seconds, it gives a lower bound of the server's clock minus the monotonic one, good
to the round trip of that read. A wake timed from a lower bound is late, never early: a
claim too early would find nothing due and cost a round trip more. Each claim's reply
checks it: a server clock that stepped back since (or a shard of another clock) makes it
disagree, and the wake is timed from the reply alone, as without it.

A run claimed ahead of its due time starts when the server's clock has surely reached it
(:meth:`ServerTime.surely_at`): timed from a lower bound too, that of the claim's reply or
the ``TIME`` read's, whichever is higher, the latter less what the two clocks may have
drifted apart since (:data:`DRIFT`). A start is then late by a fraction of a ms, never early
by the server's clock, whatever the round trips.
"""

from __future__ import annotations

from cronsvc.clock import HasTime, monotonic

READ_EVERY = 1.0  # seconds between reads of TIME: drift between two is a few µs
# How fast the server's clock may drift from this process's monotonic one, at most: two
# NTP-disciplined clocks slew at most 500 µs a second (the same host's do not drift).
DRIFT = 5e-4


class ServerTime:
    """The server's clock on the monotonic one (see the module)."""

    def __init__(self) -> None:
        self._low: float | None = None  # server ms minus monotonic ms, at least
        self._read_at = -READ_EVERY

    def read(self, client: HasTime) -> None:
        """Read ``TIME`` if the last read is old (it may raise what the client raises)."""
        if monotonic() - self._read_at < READ_EVERY:
            return
        sec, usec = client.time()
        after = monotonic()  # the server read its clock before this
        self._low = int(sec) * 1000 + int(usec) / 1000 - after * 1000
        self._read_at = after

    def wake_at(self, next_ms: int, now_ms: int, sent: float, received: float) -> float:
        """The monotonic time the server's clock reaches ``next_ms``, from a reply that
        read it as ``now_ms`` (whole ms) between ``sent`` and ``received``."""
        low = self._low
        # The server's clock was in [now_ms, now_ms + 1) at some moment of the round trip.
        if low is None or low > now_ms + 1 - sent * 1000:
            # That moment taken as the round trip's middle, as near as a reply says.
            return (sent + received) / 2 + (next_ms - now_ms) / 1000
        return (next_ms - max(low, now_ms - received * 1000)) / 1000

    def surely_at(self, due_ms: int, now_ms: int, sent: float, received: float) -> float:
        """The monotonic time by which the server's clock has surely reached ``due_ms``,
        from a reply that read it as ``now_ms`` (whole ms, truncated) between ``sent`` and
        ``received``: never early (see the module)."""
        low = now_ms - received * 1000  # the server's clock minus the monotonic one, at least
        read = self._low
        if read is not None:
            read -= abs(received - self._read_at) * 1000 * DRIFT
            # (A read the reply contradicts is of a clock stepped back since: not used.)
            if low < read <= now_ms + 1 - sent * 1000:
                low = read
        return (due_ms - low) / 1000
