"""Which Redis errors a running process rides out, and what they were.

A planner or worker must survive every error Redis gives it. Most are passing:
the connection drops while Redis restarts, or Redis answers with an error reply
that means "not now": out of memory (``OOM``), a replica after a failover
(``READONLY``), a disk it cannot write (``MISCONF``), a restart still loading
its data (``LOADING``), a long script (``BUSY``), a cluster moving or losing a
slot (``MOVED``, ``ASK``, ``TRYAGAIN``, ``CLUSTERDOWN``), a flushed script cache
(``NOSCRIPT``). Those are *outages*: back off, keep the running jobs, try again.

An error reply raised inside a Lua script carries the code after the script's
name and line (``@user_script:19: -OOM command not allowed ...``), so the code
is looked for there too.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass

import redis
from redis.exceptions import RedisClusterException

from cronsvc.clock import SYSTEM, Clock
from cronsvc.errors import ScriptError

#: Error replies that mean "Redis cannot serve this now": treated like a lost connection.
OUTAGE_CODES = frozenset({
    "OOM", "READONLY", "MISCONF", "LOADING", "BUSY", "MASTERDOWN", "NOREPLICAS",
    "TRYAGAIN", "CLUSTERDOWN", "MOVED", "ASK", "NOSCRIPT", "UNBLOCKED",
})
#: What the Redis client library raises, whatever went wrong.
LIBRARY_ERRORS: tuple[type[Exception], ...] = (redis.RedisError, RedisClusterException)
#: What every loop of a worker or planner catches, so that no Redis error ends it.
REDIS_ERRORS: tuple[type[Exception], ...] = (*LIBRARY_ERRORS, ScriptError)

# The code: the reply's first word, or the word after a script's place inside its error
# (``@user_script:19: -OOM ...``; Redis 6 writes the reply of a failed redis.call without
# the '-': ``@user_script:59: WRONGTYPE ...``). Scripts' own codes have '_' (LEASE_LOST).
_CODE = re.compile(r"(?:^|\s-|:\s*-?)([A-Z][A-Z_]+)\b")
# redis-py takes the code off the message of these replies and raises a class instead.
_CLASS_CODES: tuple[tuple[type[Exception], str], ...] = (
    (redis.exceptions.OutOfMemoryError, "OOM"), (redis.exceptions.ReadOnlyError, "READONLY"),
    (redis.exceptions.BusyLoadingError, "LOADING"), (redis.exceptions.NoScriptError, "NOSCRIPT"),
    (redis.exceptions.MasterDownError, "MASTERDOWN"), (redis.exceptions.TryAgainError, "TRYAGAIN"),
    (redis.exceptions.ClusterDownError, "CLUSTERDOWN"), (redis.exceptions.MovedError, "MOVED"),
    (redis.exceptions.AskError, "ASK"),
)


def reply_code(exc: BaseException) -> str | None:
    """The error code of an error reply (``OOM``, ``READONLY``, ...), else None."""
    for cls, code in _CLASS_CODES:
        if isinstance(exc, cls):
            return code
    if not isinstance(exc, redis.ResponseError | ScriptError):
        return None
    text = str(exc)
    for m in _CODE.finditer(text):
        if m.group(1) in OUTAGE_CODES:
            return m.group(1)
    first = _CODE.search(text)
    return first.group(1) if first else None


def describe(exc: BaseException) -> str:
    """One line for a log or a status: the message, led by the reply's code where the
    message lacks it. redis-py 8 takes the code off the replies it turns into classes, so
    an OOM reply reads ``command not allowed when used memory > 'maxmemory'.``: a log of
    that alone does not say which fault it was."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    code = reply_code(exc)
    if code is None or re.search(rf"\b{code}\b", text):
        return text
    return f"{code} {text}"


def is_outage(exc: BaseException) -> bool:
    """True for errors that pass: Redis unreachable, or an error reply meaning "not now"."""
    if isinstance(exc, redis.ConnectionError | redis.TimeoutError | RedisClusterException):
        return True  # BusyLoadingError (LOADING) is a ConnectionError too
    return reply_code(exc) in OUTAGE_CODES


@dataclass(frozen=True)
class SeenError:
    """The last Redis error a process saw: shown by ``cronsvc status``."""

    code: str  # the reply's code, or the exception's class for a lost connection
    message: str
    at_ms: int


class ErrorLog:
    """Remembers the last Redis error of a process (thread-safe) and counts them by code."""

    def __init__(self, clock: Clock = SYSTEM) -> None:
        self.clock = clock
        self.last: SeenError | None = None
        self.counts: dict[str, int] = {}
        self._lock = threading.Lock()

    def note(self, exc: BaseException) -> str:
        """Record ``exc``; its code (``OOM``..., or the class name without a reply)."""
        code = reply_code(exc) or type(exc).__name__
        seen = SeenError(code, describe(exc)[:300], self.clock.now_ms())
        with self._lock:
            self.last = seen
            self.counts[code] = self.counts.get(code, 0) + 1
        return code

    def as_info(self) -> dict[str, object] | None:
        """The last error as presence info carries it (``None``: none seen)."""
        last = self.last
        if last is None:
            return None
        return {"code": last.code, "message": last.message, "at": last.at_ms}
