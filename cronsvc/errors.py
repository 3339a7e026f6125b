"""One hierarchy of errors, rooted at :class:`CronsvcError`.

Every message is meant to be shown to a user as is: one line that names the
place (file, job, field, URL) and what is wrong there.
"""

from __future__ import annotations

from collections.abc import Sequence


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


class UnknownFire(ScriptError):
    """The fire id is not queued, in flight or dead."""


class BadTime(CronsvcError, ValueError):
    """A time given for a one-off run is not one (naive) or is out of range (a
    ValueError too, for callers that catch that)."""


class UnknownJob(CronsvcError):
    """No job of that name exists in the configuration."""


class JobFailed(CronsvcError):
    """A job ran and did not succeed."""
