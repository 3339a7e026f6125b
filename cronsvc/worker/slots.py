"""The threads a worker runs its jobs in.

Unlike :class:`concurrent.futures.ThreadPoolExecutor`, whose threads the
interpreter joins at exit, these are daemon threads: a `call` job that ignores
its cancel cannot keep a stopped worker process alive.

A task is never left waiting behind another one while a thread is free: whenever tasks
wait and no thread is on its way to take one, a thread is woken (or started) for them.
But a thread is not woken per task: one that ends its task takes the next waiting one
itself. A claim of 50 no-op calls is then run by one or two threads in turn, not handed
to 50 threads, each woken through the kernel and each waiting its turn for the GIL.
Commands are the exception (:meth:`Slots.submit_each`): a command's start waits on the
system (a fork and exec, the GIL held), and woken one after the other, the tenth command
of a claim would wait for nine wake-ups in a row, each behind a start.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable
from itertools import repeat
from typing import Any

log = logging.getLogger("cronsvc.worker")

Task = tuple[Callable[..., Any], tuple[Any, ...]]


class Slots:
    """At most ``size`` daemon threads taking tasks in order; started as needed."""

    def __init__(self, size: int, name: str) -> None:
        self._size = size
        self._name = name
        self._tasks: deque[Task] = deque()
        self._lock = threading.Lock()
        # The idle threads, each waiting on its own gate (a lock it holds): the last to
        # fall idle is the first woken.
        self._idle: list[threading.Lock] = []
        self._coming = 0  # threads woken or started that have not looked at the tasks yet
        self._started = 0
        self._closed = False

    def submit(self, fn: Callable[..., Any], *args: Any) -> None:
        self.submit_many(fn, [args])

    def submit_many(self, fn: Callable[..., Any], each: list[tuple[Any, ...]]) -> None:
        """``fn(*args)`` for each of ``each``, in order: queued under one hold of the lock,
        one thread called for them all (it calls the next, see :meth:`_serve`)."""
        if not each:
            return
        with self._lock:
            self._tasks.extend(zip(repeat(fn), each))
            new = self._call_one()
        if new is not None:
            self._start(new)

    def submit_each(self, fn: Callable[..., Any], each: list[tuple[Any, ...]]) -> None:
        """``fn(*args)`` for each of ``each``, in order, with a thread called for each task
        at once (as far as there are threads), not one after the other: for tasks that
        spend their start waiting on the system (a command's start) rather than running
        Python, so that no task waits for the one before it to be under way."""
        if not each:
            return
        with self._lock:
            self._tasks.extend(zip(repeat(fn), each))
            new = [self._call_another() for _ in each]
        for number in new:
            if number is not None:
                self._start(number)

    def _call_one(self) -> int | None:
        """Holding the lock, with tasks waiting: make sure a thread comes for them. The
        number of a new one to start (by the caller, the lock released), if it must be."""
        if self._coming:
            return None  # one comes: it takes a task, and calls the next thread if more wait
        return self._call_another()

    def _call_another(self) -> int | None:
        """Holding the lock: wake an idle thread, or say which new one to start, whether or
        not another is on its way; None if every thread is busy (the first done takes the
        next task)."""
        if self._idle:
            self._coming += 1
            self._idle.pop().release()
            return None
        if self._started < self._size:
            self._coming += 1
            self._started += 1
            return self._started - 1
        return None

    def _start(self, number: int) -> None:
        gate = threading.Lock()
        gate.acquire()
        threading.Thread(target=self._serve, args=(gate,), daemon=True,
                         name=f"{self._name}-{number}").start()

    def _serve(self, gate: threading.Lock) -> None:
        lock, tasks = self._lock, self._tasks
        coming = True  # started (or woken) for a task
        while True:
            new = None
            with lock:
                if coming:
                    self._coming -= 1
                if tasks:
                    fn, args = tasks.popleft()
                    if tasks and not self._coming:  # _call_one, without its call per task
                        new = self._call_another()
                elif self._closed:
                    self._started -= 1
                    return
                else:
                    fn = None
                    self._idle.append(gate)
            if new is not None:
                self._start(new)
            if fn is None:
                gate.acquire()  # until a task comes (see _call_one), or the end
                coming = True
                continue
            coming = False
            try:
                fn(*args)
            except Exception:  # a task's bug must not cost the worker a slot
                log.exception("task %r failed", fn)
            del fn, args  # nothing of a task done is held while idle

    def close(self) -> None:
        """Let every thread end once the tasks queued before are done; do not wait."""
        with self._lock:
            self._closed = True
            while self._idle:
                self._coming += 1
                self._idle.pop().release()
