"""The consumer side of a dispatched fire: run its delivery once, report how it went.

A queue may deliver one message twice (a dispatcher that died between its send and its
ack sends the same delivery again; a broker redelivers). Before the task runs, the guard
marks the delivery started in the fire's deliveries (``lua/dispatch-1.lua``, atomically):
a second delivery finds it started or ended and is skipped. Once the task returns or
raises, the guard writes ok or failed, with its duration and error, and the cronsvc
worker waiting on the fire records it as it records a ``call`` job's run: history,
``cronsvc show``, notifications, auto-pause and chains follow.

While the task runs, ``cronsvc.current()`` is its fire's context (job, fire id,
scheduled time, attempt, payload) and, where the cronsvc worker traces and OpenTelemetry
is installed, the current OpenTelemetry context is the span that sent it
(:func:`cronsvc.run.tracecontext.adopt`): the task's spans join the fire's trace.

cronsvc's Redis may be away for a moment (a restart, a failover): the guard tries its
calls again for :data:`PATIENCE_S`. A start that Redis wrote but whose reply was lost
would read, when tried again, as a second delivery, so each copy marks its start with a
token of its own and, after a failed try, recognises its own mark: the task neither runs
twice nor is skipped by its own start.
"""

from __future__ import annotations

import functools
import logging
import os
import secrets
import socket
import time
import traceback
from collections.abc import Awaitable, Callable
from contextvars import Token
from dataclasses import dataclass
from typing import Any, TypeVar

import redis

from cronsvc.clock import monotonic
from cronsvc.errors import CronsvcError, RedisUnavailable
from cronsvc.run import tracecontext
from cronsvc.run.dispatch import KEEP_MS, Delivery, as_text
from cronsvc.run.outcome import OUTPUT_CAP
from cronsvc.run.within import RUN, InRun
from cronsvc.store.connection import connect
from cronsvc.store.faults import describe, is_outage
from cronsvc.store.scripts import Scripts

log = logging.getLogger("cronsvc.contrib")

T = TypeVar("T")
#: Where the guard finds cronsvc's Redis when it is not given a client or URL.
URL_VARIABLE = "CRONSVC_REDIS_URL"
#: How long a call of the guard is tried again while cronsvc's Redis is away: longer than
#: a restart or a failover takes.
PATIENCE_S = 30.0
RETRY_EVERY_S = 0.2


class Skipped:
    """What a guarded task returns for a second delivery of a fire (it did not run)."""

    def __repr__(self) -> str:
        return "<skipped: a second delivery of a fire that already ran or runs>"


SKIPPED = Skipped()


@dataclass(frozen=True)
class Running:
    """A delivery the guard let run: its ``current()`` to reset and when it started."""

    delivery: Delivery
    token: Token[InRun]
    t0: float
    traced: Any = None  # the OpenTelemetry context to restore, if the delivery's was set


class Guard:
    """Runs each delivery of a fire once, on cronsvc's Redis (``url``, else the
    ``CRONSVC_REDIS_URL`` variable, else the client given)."""

    def __init__(self, url: str | None = None, *, client: redis.Redis | None = None,
                 name: str | None = None) -> None:
        self._url = url
        self._client = client
        self._scripts: Scripts | None = None
        self.name = name or f"{socket.gethostname()}:{os.getpid()}"

    @property
    def scripts(self) -> Scripts:
        if self._scripts is None:
            if self._client is None:
                url = self._url or os.environ.get(URL_VARIABLE)
                if not url:
                    raise CronsvcError(f"cronsvc's guard needs cronsvc's Redis: set "
                                       f"{URL_VARIABLE} or pass a url")
                self._client = connect(url)
            self._scripts = Scripts(self._client)
        return self._scripts

    def _patiently(self, delivery: Delivery, call: Callable[[], T]) -> tuple[T, bool]:
        """``call()``'s reply, tried again while Redis is away (for :data:`PATIENCE_S`),
        and whether a try failed: its write may have landed with its reply lost."""
        deadline = time.monotonic() + PATIENCE_S
        failed = False
        while True:
            try:
                return call(), failed
            except Exception as exc:
                away = isinstance(exc, RedisUnavailable) or is_outage(exc)
                if not away or time.monotonic() >= deadline:
                    raise
                failed = True
                log.warning("%s: cannot reach cronsvc's Redis, trying again: %s",
                            delivery.fire_id, describe(exc))
                time.sleep(RETRY_EVERY_S)

    def _started_by(self, delivery: Delivery, mark: str) -> bool:
        """Whether the last word on ``delivery`` is its start by ``mark``."""
        found: Any = self._patiently(delivery, lambda: self.scripts.client.xrevrange(
            delivery.key, count=1))[0]
        if not found:
            return False
        fields = {as_text(k): as_text(v) for k, v in found[0][1].items()}
        return fields.get("state") == "started" and fields.get("by") == mark and \
            fields.get("d") == str(delivery.attempt)

    def start(self, delivery: Delivery) -> bool:
        """Mark ``delivery`` started; False if it is a second delivery (do not run it)."""
        mark = f"{self.name}/{secrets.token_hex(4)}"  # this copy's start, and no other's
        ran, retried = self._patiently(delivery, lambda: self.scripts.dispatch(
            delivery.key, "start", delivery.attempt, KEEP_MS, mark))
        if not int(ran) and retried and self._started_by(delivery, mark):
            ran = 1  # its own start landed; the reply was lost
        if not int(ran):
            log.warning("%s: skipped, a second delivery (attempt %d's)", delivery.fire_id,
                        delivery.attempt)
        return bool(int(ran))

    def end(self, delivery: Delivery, took_ms: int, exc: BaseException | None = None,
            value: Any = None) -> None:
        """Report how ``delivery``'s task ended: its return value, or ``exc``."""
        if exc is None:
            state, error, output = "ok", "", repr(value)
        else:
            state, error = "failed", f"{type(exc).__name__}: {exc}".splitlines()[0]
            output = "".join(traceback.format_exception(exc))
        self._patiently(delivery, lambda: self.scripts.dispatch(
            delivery.key, "end", delivery.attempt, KEEP_MS, state, int(took_ms), error,
            output[-OUTPUT_CAP:]))

    def begin(self, delivery: Delivery) -> Running | None:
        """Mark ``delivery`` started and make it ``cronsvc.current()``; None if it is a
        second delivery (do not run it). For a queue whose hooks come before and after
        its task (dramatiq's middleware), where :meth:`run` cannot wrap the task."""
        if not self.start(delivery):
            return None
        outer = RUN.get()  # what a run this task is in set: kept, but its fire
        return Running(delivery, RUN.set(InRun(delivery.context(self.name), outer.stop,
                                               outer.output)), monotonic(),
                       tracecontext.adopt(delivery.trace))

    def finish(self, running: Running, exc: BaseException | None = None,
               value: Any = None) -> None:
        """Report how the task :meth:`begin` let run ended, and end its ``current()``."""
        tracecontext.detach(running.traced)
        RUN.reset(running.token)
        self.end(running.delivery, int((monotonic() - running.t0) * 1000), exc, value)

    def run(self, delivery: Delivery | None, task: Callable[[], T]) -> T | Skipped:
        """``task()`` once for ``delivery`` (no delivery: a message cronsvc did not send,
        run as it is); its value, or :data:`SKIPPED` for a second delivery. An exception
        is reported, then raised again for the queue's own handling."""
        if delivery is None:
            return task()
        running = self.begin(delivery)
        if running is None:
            return SKIPPED
        try:
            value = task()
        except BaseException as exc:
            self.finish(running, exc)
            raise
        self.finish(running, value=value)
        return value

    async def run_async(self, delivery: Delivery | None,
                        task: Callable[[], Awaitable[T]]) -> T | Skipped:
        """:meth:`run` for a coroutine (arq). The guard's Redis calls are short and made
        before and after the task, not during it."""
        if delivery is None:
            return await task()
        running = self.begin(delivery)
        if running is None:
            return SKIPPED
        try:
            value = await task()
        except BaseException as exc:
            self.finish(running, exc)
            raise
        self.finish(running, value=value)
        return value


@functools.cache
def process_guard(url: str | None = None) -> Guard:
    """This process's guard on cronsvc's Redis at ``url`` (None: ``CRONSVC_REDIS_URL``),
    made once: one connection for every task the queue's worker runs."""
    return Guard(url)
