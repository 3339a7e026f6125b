"""The threads a worker runs its jobs in.

Unlike :class:`concurrent.futures.ThreadPoolExecutor`, whose threads the
interpreter joins at exit, these are daemon threads: a `call` job that ignores
its cancel cannot keep a stopped worker process alive.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable
from typing import Any

log = logging.getLogger("cronsvc.worker")


class Slots:
    """``size`` daemon threads taking tasks in order; started on first use."""

    def __init__(self, size: int, name: str) -> None:
        self._size = size
        self._name = name
        self._tasks: queue.SimpleQueue[tuple[Callable[..., Any], tuple[Any, ...]] | None] = (
            queue.SimpleQueue())
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()

    def submit(self, fn: Callable[..., Any], *args: Any) -> None:
        if len(self._threads) < self._size:
            with self._lock:
                if len(self._threads) < self._size:
                    thread = threading.Thread(target=self._serve, daemon=True,
                                              name=f"{self._name}-{len(self._threads)}")
                    thread.start()
                    self._threads.append(thread)
        self._tasks.put((fn, args))

    def _serve(self) -> None:
        while (task := self._tasks.get()) is not None:
            fn, args = task
            try:
                fn(*args)
            except Exception:  # a task's bug must not cost the worker a slot
                log.exception("task %r failed", fn)

    def close(self) -> None:
        """Let every thread end once the tasks queued before are done; do not wait."""
        with self._lock:
            for _ in self._threads:
                self._tasks.put(None)
