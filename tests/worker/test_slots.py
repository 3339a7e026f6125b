"""The worker's slot threads: a task never waits behind another while a thread is free,
at most ``size`` run at once, and a thread takes the tasks waiting in turn."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from cronsvc.worker.slots import Slots
from tests.support.wait import wait_for


def threads(prefix: str) -> int:
    return sum(t.name.startswith(prefix) for t in threading.enumerate())


def held(started: threading.Semaphore, release: threading.Event) -> None:
    """A task that says it started, then blocks until released."""
    started.release()
    release.wait()


@contextmanager
def slots_of(size: int, name: str) -> Iterator[tuple[Slots, threading.Event]]:
    """Slots, and what releases their blocked tasks (at the end at the latest)."""
    slots, release = Slots(size, name), threading.Event()
    try:
        yield slots, release
    finally:
        release.set()
        slots.close()


def idle_threads(slots: Slots, n: int) -> None:
    """Start ``n`` threads of ``slots`` and let them fall idle."""
    together = threading.Barrier(n + 1)
    for _ in range(n):
        slots.submit(together.wait)
    together.wait(timeout=10)
    wait_for(lambda: len(slots._idle) == n, timeout=10, message=f"{n} idle threads")


def test_a_blocking_task_does_not_hold_back_the_tasks_after_it() -> None:
    ran: list[int] = []
    with slots_of(3, "t") as (slots, release):
        idle_threads(slots, 3)
        # Queued at once: the thread woken for them takes the first and blocks, and calls
        # another for the rest, which calls the third.
        slots.submit(release.wait)
        slots.submit(release.wait)
        for i in range(20):
            slots.submit(ran.append, i)
        wait_for(lambda: len(ran) == 20, timeout=10, message="the tasks behind two blocked")
        assert ran == list(range(20))  # in order, by the one thread left


def test_a_task_submitted_while_every_thread_is_busy_waits_for_a_free_one() -> None:
    started = threading.Semaphore(0)
    ran: list[str] = []
    with slots_of(2, "two") as (slots, release):
        slots.submit(held, started, release)
        slots.submit(held, started, release)
        assert started.acquire(timeout=10) and started.acquire(timeout=10)
        slots.submit(ran.append, "third")
        assert ran == [] and threads("two-") == 2  # no third thread for it
        release.set()
        wait_for(lambda: ran == ["third"], timeout=10, message="the third task")


def test_many_blocking_tasks_each_get_a_thread_up_to_the_size() -> None:
    running = threading.Semaphore(0)
    with slots_of(50, "fifty") as (slots, release):
        for _ in range(60):
            slots.submit(held, running, release)
        for _ in range(50):
            assert running.acquire(timeout=10)
        assert threads("fifty-") == 50  # the 10 left wait for a thread


def test_a_task_that_raises_costs_no_thread() -> None:
    ran: list[int] = []
    with slots_of(1, "t") as (slots, _):
        slots.submit(lambda: 1 / 0)
        slots.submit(ran.append, 1)
        wait_for(lambda: ran == [1], timeout=10, message="the task after the one that raised")


def test_close_ends_the_threads_once_the_tasks_queued_are_done() -> None:
    slots = Slots(4, "closing")
    release = threading.Event()
    ran: list[int] = []
    slots.submit(release.wait)
    for i in range(5):
        slots.submit(ran.append, i)
    wait_for(lambda: len(ran) == 5, timeout=10, message="the tasks")
    slots.close()
    release.set()
    wait_for(lambda: threads("closing-") == 0, timeout=10, message="the threads ended")


def test_submit_each_calls_a_thread_for_each_task_at_once() -> None:
    started = threading.Semaphore(0)
    with slots_of(4, "e") as (slots, release):
        idle_threads(slots, 4)
        # Five tasks, four threads: each idle thread is woken by the submitter itself, not
        # by the thread before it once that one has taken its task.
        slots.submit_each(held, [(started, release)] * 5)
        assert not slots._idle
        for _ in range(4):
            assert started.acquire(timeout=10)
        assert threads("e-") == 4  # the fifth waits for a free thread
        release.set()
        assert started.acquire(timeout=10)
