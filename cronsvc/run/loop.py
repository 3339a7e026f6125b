"""The worker's one event loop, where every ``async def`` call target is awaited.

An async call spends its time waiting; a thread each would cost a worker's slots for
nothing. So one daemon thread runs one asyncio loop for the whole process, started when
the first async run comes, and every async run is a task on it. A task that blocks (sync
I/O, CPU work) holds up the others: such code belongs in a sync target.
"""

from __future__ import annotations

import asyncio
import threading
from collections import deque
from collections.abc import Callable
from typing import Any


class Loop:
    """An asyncio loop in a daemon thread of its own, started on first use."""

    def __init__(self, name: str = "cronsvc-loop") -> None:
        self._name = name
        self._loop: asyncio.AbstractEventLoop | None = None
        self._lock = threading.Lock()
        # Calls from other threads, run in order by one callback of the loop: a claim of
        # many async fires wakes the loop once, not once per fire (a write to its socket).
        self._calls: deque[tuple[Callable[..., Any], tuple[Any, ...]]] = deque()
        self._woken = False  # a run of the calls is on the loop's way

    def call(self, fn: Callable[..., Any], *args: Any) -> None:
        """Run ``fn(*args)`` on the loop's thread, soon (from any thread), after the calls
        asked before it."""
        self._calls.append((fn, args))
        if not self._woken:
            self._woken = True
            self._started().call_soon_threadsafe(self._run_calls)

    def _run_calls(self) -> None:
        # Cleared first: a call added from now on wakes the loop again (at worst for
        # nothing), one added before is run below.
        self._woken = False
        calls = self._calls
        while calls:
            fn, args = calls.popleft()
            try:
                fn(*args)
            except Exception as exc:  # as the loop does with a callback that raises
                self._started().call_exception_handler(
                    {"message": f"exception in a call of {self._name}", "exception": exc})

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        return self._started()

    def _started(self) -> asyncio.AbstractEventLoop:
        loop = self._loop
        if loop is not None:
            return loop
        with self._lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                threading.Thread(target=loop.run_forever, name=self._name,
                                 daemon=True).start()
                self._loop = loop
            return self._loop


#: The process's loop: a worker process runs one worker.
SHARED = Loop()
