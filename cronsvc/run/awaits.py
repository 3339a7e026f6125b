"""One awaitable of a ``call`` job, run as a task on the worker's loop
(:mod:`cronsvc.run.loop`), and stopped by cancelling that task.

Unlike a thread, a task can be stopped: a timeout, a cancel, a lost lease or a shutdown
cancels it, the awaitable sees :class:`asyncio.CancelledError` where it waits, and its
``finally`` blocks run. The task sets the fire's context variables itself
(``cronsvc.current()``, ``cronsvc.stopping()``, the run's output, the fire's trace
context), so concurrent tasks each see their own.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Awaitable, Callable
from typing import Any

from cronsvc.clock import monotonic
from cronsvc.run import tracecontext
from cronsvc.run.capture import install
from cronsvc.run.context import FireContext
from cronsvc.run.flag import Flag
from cronsvc.run.loop import SHARED, Loop
from cronsvc.run.outcome import How
from cronsvc.run.output import Kept
from cronsvc.run.within import RUN, InRun

#: Told how the awaitable ended: "done" with its value or the exception it raised (None
#: if it returned), or "timeout"/"cancelled" (the value None, the exception None).
Ended = Callable[[How, Any, BaseException | None], None]


class Awaited:
    """An awaitable running as a task on ``loop``; :meth:`cancel` stops it from any
    thread. ``ended`` is called once, on the loop's thread: it must not block."""

    def __init__(self, awaitable: Awaitable[Any], ctx: FireContext, out: Kept,
                 deadline: float | None, ended: Ended, loop: Loop = SHARED) -> None:
        self._awaitable = awaitable
        self._ctx, self._out, self._deadline, self._ended = ctx, out, deadline, ended
        self._loop = loop
        self._task: asyncio.Task[Any] | None = None
        self._cancelled = False  # asked before the task existed
        self._timed_out = False
        self.stopping = Flag()  # what cronsvc.stopping() reads inside the task
        loop.call(self._begin)

    def cancel(self) -> None:
        """Cancel the task (its ``finally`` runs); it then ends as "cancelled"."""
        self.stopping.set()
        self._loop.call(self._cancel)

    def _cancel(self) -> None:
        self._cancelled = True
        if self._task is not None:
            self._task.cancel()

    def _expire(self) -> None:
        if self._task is not None and not self._task.done():
            self._timed_out = True
            self.stopping.set()  # before the task sees its cancel: stopping() says so
            self._task.cancel()

    def _begin(self) -> None:
        if self._cancelled:
            self._close()
            self._ended("cancelled", None, None)
            return
        # A context of its own: nothing of the thread that started it leaks in.
        loop = self._loop.loop
        self._task = loop.create_task(self._guarded(), context=contextvars.Context())
        self._task.add_done_callback(self._done)
        if self._deadline is not None:
            timer = loop.call_later(max(self._deadline - monotonic(), 0), self._expire)
            self._task.add_done_callback(lambda _: timer.cancel())

    async def _guarded(self) -> tuple[How, Any, BaseException | None]:
        tracecontext.attach(self._ctx.trace)  # the task's own context, gone with it
        # The fire, its stop and its output are the current ones: the task's context is its
        # own, so they are set for the task only.
        install()
        RUN.set(InRun(self._ctx, self.stopping, self._out))
        try:
            return "done", await self._awaitable, None
        except asyncio.CancelledError:
            self.stopping.set()
            return ("timeout" if self._timed_out else "cancelled"), None, None
        except BaseException as exc:  # SystemExit and friends must not end the loop
            return "done", None, exc

    def _done(self, task: asyncio.Task[Any]) -> None:
        if task.cancelled():  # cancelled before its first step: the awaitable never ran
            self._close()
            self._ended("cancelled", None, None)
            return
        self._ended(*task.result())

    def _close(self) -> None:
        close = getattr(self._awaitable, "close", None)
        if close is not None:
            close()  # a coroutine never awaited, closed without a warning
