"""The worker's slot threads: a task never waits behind another while a thread is free,
at most ``size`` run at once, and a thread takes the tasks waiting in turn."""

from __future__ import annotations

import threading

from cronsvc.worker.slots import Slots
from tests.support.wait import wait_for


def threads(prefix: str) -> int:
    return sum(t.name.startswith(prefix) for t in threading.enumerate())


def idle_threads(slots: Slots, n: int) -> None:
    """Start ``n`` threads of ``slots`` and let them fall idle."""
    together = threading.Barrier(n + 1)
    for _ in range(n):
        slots.submit(together.wait)
    together.wait(timeout=10)
    wait_for(lambda: len(slots._idle) == n, timeout=10, message=f"{n} idle threads")


def test_a_blocking_task_does_not_hold_back_the_tasks_after_it() -> None:
    slots = Slots(3, "t")
    idle_threads(slots, 3)
    release = threading.Event()
    ran: list[int] = []
    try:
        # Queued at once: the thread woken for them takes the first and blocks, and calls
        # another for the rest, which calls the third.
        slots.submit(release.wait)
        slots.submit(release.wait)
        for i in range(20):
            slots.submit(ran.append, i)
        wait_for(lambda: len(ran) == 20, timeout=10, message="the tasks behind two blocked")
        assert ran == list(range(20))  # in order, by the one thread left
    finally:
        release.set()
        slots.close()


def test_a_task_submitted_while_every_thread_is_busy_waits_for_a_free_one() -> None:
    slots = Slots(2, "two")
    release = threading.Event()
    started = threading.Semaphore(0)
    ran: list[str] = []

    def held() -> None:
        started.release()
        release.wait()

    try:
        slots.submit(held)
        slots.submit(held)
        assert started.acquire(timeout=10) and started.acquire(timeout=10)
        slots.submit(ran.append, "third")
        assert ran == [] and threads("two-") == 2  # no third thread for it
        release.set()
        wait_for(lambda: ran == ["third"], timeout=10, message="the third task")
    finally:
        release.set()
        slots.close()


def test_many_blocking_tasks_each_get_a_thread_up_to_the_size() -> None:
    slots = Slots(50, "fifty")
    release = threading.Event()
    running = threading.Semaphore(0)

    def held() -> None:
        running.release()
        release.wait()

    try:
        for _ in range(60):
            slots.submit(held)
        for _ in range(50):
            assert running.acquire(timeout=10)
        assert threads("fifty-") == 50  # the 10 left wait for a thread
    finally:
        release.set()
        slots.close()


def test_a_task_that_raises_costs_no_thread() -> None:
    slots = Slots(1, "t")
    ran: list[int] = []
    try:
        slots.submit(lambda: 1 / 0)
        slots.submit(ran.append, 1)
        wait_for(lambda: ran == [1], timeout=10, message="the task after the one that raised")
    finally:
        slots.close()


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
