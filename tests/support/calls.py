"""Targets for `call` jobs run in the test process (tests/run/test_executor.py) and by
workers of the tests (referenced as `tests.support.calls:<name>`)."""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from cronsvc import current, stopping
from cronsvc.run.context import FireContext
from cronsvc.run.within import RUN

STARTED = threading.Event()
SAW_STOP = threading.Event()


def add(a: int, b: int, scale: int = 1) -> int:
    return (a + b) * scale


def with_ctx(suffix: str, ctx: FireContext) -> str:
    return f"{ctx.fire_id}/{ctx.attempt}/{suffix}"


def from_current() -> dict[str, Any]:
    ctx = current()
    assert ctx is not None
    return {"job": ctx.job, "payload": ctx.payload}


def nothing() -> None:
    return None


def current_twice() -> str:
    """The fire's context as ``current()`` gives it, asked twice: the same object."""
    first, second = current(), current()
    assert first is not None and first is second
    return repr(first)


def ctx_is_current(ctx: FireContext) -> str:
    """The ``ctx`` given is what ``current()`` gives."""
    assert current() is ctx
    return repr(ctx)


def big() -> str:
    return "x" * 100_000


def boom() -> None:
    raise ValueError("bad thing happened")


def until_stopped() -> str:
    """A cooperative long job: returns only once the executor asks it to stop."""
    STARTED.set()
    deadline = time.monotonic() + 30
    while not stopping() and time.monotonic() < deadline:
        time.sleep(0.01)
    SAW_STOP.set()
    return "stopped"


NOT_CALLABLE = 42


def thread_name() -> str:
    return threading.current_thread().name


def set_event(event: threading.Event) -> None:
    """Sets ``event`` (a cancel, while the call runs) and returns."""
    event.set()


def loud(times: int = 1) -> str:
    """Prints, logs and returns something: what a run keeps of its output."""
    for n in range(times):
        print(f"line {n}")
    logging.getLogger("tests.loud").warning("logged")
    return "said"


def cancel_self() -> None:
    """Sets its own run's cancel (as a lost lease or a stop would, meanwhile) and returns."""
    stop = RUN.get().stop
    assert stop is not None
    stop.set()


def touch(path: str) -> None:
    with open(path, "a"):
        pass
