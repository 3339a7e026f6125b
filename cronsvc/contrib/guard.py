"""The consumer side of a dispatched fire: run its delivery once, report how it went.

A queue may deliver one message twice (a dispatcher that died between its send and its
ack sends the same delivery again; a broker redelivers). Before the task runs, the guard
marks the delivery started in the fire's deliveries (``lua/dispatch-1.lua``, atomically):
a second delivery finds it started or ended and is skipped. Once the task returns or
raises, the guard writes ok or failed, with its duration and error, and the cronsvc
worker waiting on the fire records it as it records a ``call`` job's run: history,
``cronsvc show``, notifications, auto-pause and chains follow.

While the task runs, ``cronsvc.current()`` is its fire's context (job, fire id,
scheduled time, attempt, payload).
"""

from __future__ import annotations

import functools
import logging
import os
import socket
import traceback
from collections.abc import Awaitable, Callable
from contextvars import Token
from dataclasses import dataclass
from typing import Any, TypeVar

import redis

from cronsvc.clock import monotonic
from cronsvc.errors import CronsvcError
from cronsvc.run.context import CURRENT_FIRE, FireContext
from cronsvc.run.dispatch import KEEP_MS, Delivery
from cronsvc.run.outcome import OUTPUT_CAP
from cronsvc.store.connection import connect
from cronsvc.store.scripts import Scripts

log = logging.getLogger("cronsvc.contrib")

T = TypeVar("T")
#: Where the guard finds cronsvc's Redis when it is not given a client or URL.
URL_VARIABLE = "CRONSVC_REDIS_URL"


class Skipped:
    """What a guarded task returns for a second delivery of a fire (it did not run)."""

    def __repr__(self) -> str:
        return "<skipped: a second delivery of a fire that already ran or runs>"


SKIPPED = Skipped()


@dataclass(frozen=True)
class Running:
    """A delivery the guard let run: its ``current()`` to reset and when it started."""

    delivery: Delivery
    token: Token[FireContext | None]
    t0: float


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

    def start(self, delivery: Delivery) -> bool:
        """Mark ``delivery`` started; False if it is a second delivery (do not run it)."""
        ran = self.scripts.dispatch(delivery.key, "start", delivery.attempt, KEEP_MS,
                                    self.name)
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
        self.scripts.dispatch(delivery.key, "end", delivery.attempt, KEEP_MS, state,
                              int(took_ms), error, output[-OUTPUT_CAP:])

    def begin(self, delivery: Delivery) -> Running | None:
        """Mark ``delivery`` started and make it ``cronsvc.current()``; None if it is a
        second delivery (do not run it). For a queue whose hooks come before and after
        its task (dramatiq's middleware), where :meth:`run` cannot wrap the task."""
        if not self.start(delivery):
            return None
        return Running(delivery, CURRENT_FIRE.set(delivery.context(self.name)), monotonic())

    def finish(self, running: Running, exc: BaseException | None = None,
               value: Any = None) -> None:
        """Report how the task :meth:`begin` let run ended, and end its ``current()``."""
        CURRENT_FIRE.reset(running.token)
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
