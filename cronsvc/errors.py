"""One hierarchy of errors, rooted at :class:`CronsvcError`.

Every message is meant to be shown to a user as is: one line that names the
place (file, job, field, URL) and what is wrong there.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Sequence


class CronsvcError(Exception):
    """Base of every error cronsvc raises on purpose."""


class ConfigError(CronsvcError):
    """The job file is missing, unreadable or invalid; carries every problem found."""

    def __init__(self, problems: Sequence[str]) -> None:
        self.problems = list(problems)
        super().__init__("\n".join(self.problems))


class ScheduleError(CronsvcError):
    """A cron expression or time zone cannot be expanded."""


class RedisUnavailable(CronsvcError):
    """Redis cannot be reached at the configured URL."""


class RedisServerError(CronsvcError):
    """An embedded redis-server cannot be found or started."""


class ScriptError(CronsvcError):
    """A Lua script returned an error or was called with the wrong keys."""


class LeaseLost(ScriptError):
    """The fencing token no longer matches: another worker holds this fire now."""


class Superseded(ScriptError):
    """A newer generation of the job file was published to this shard meanwhile."""


class NotLeader(ScriptError):
    """Another notifier holds the lease: this one must not send."""


class UnknownFire(ScriptError):
    """The fire id is not queued, in flight or dead."""


class Unreadable(CronsvcError):
    """An entry read back from Redis is not what its key holds (written there by hand or
    by another program): the message names the key and the entry."""


class BadTime(CronsvcError, ValueError):
    """A time given for a one-off run is not one (naive) or is out of range (a
    ValueError too, for callers that catch that)."""


class BadArgument(CronsvcError, ValueError):
    """An argument of a library call is not valid: a fire id that is not one, a Client
    without a Redis URL (a ValueError too, for callers that catch that)."""


class BadSchedule(CronsvcError, ValueError):
    """A runtime schedule is not valid: its id, its job, or one of its fields (the
    message names which); a ValueError too."""


class Skipped(CronsvcError):
    """A trigger the job's bounds would skip now (overlap, max_concurrent, a named limit):
    it is not queued; the message says why."""


class UnknownSchedule(CronsvcError):
    """No runtime schedule has that id."""


class UnknownJob(CronsvcError):
    """No job of that name exists in the configuration."""


class StillRunning(CronsvcError):
    """A paused job's runs claimed before the pause did not end in the time given."""


def did_you_mean(word: object, choices: Iterable[str], *, n: int = 1, quote: bool = True) -> str:
    """``; did you mean 'x'?`` for a likely typo of one of ``choices`` (up to ``n`` of
    them), else ``""``: the tail of an error message."""
    found = difflib.get_close_matches(str(word), list(choices), n=n, cutoff=0.6)
    if not found:
        return ""
    return "; did you mean " + ", ".join(repr(f) if quote else f for f in found) + "?"
