"""Polling with a deadline, never a bare sleep: how a test of real processes waits.

Plain Python, so it works under any runner and in the benchmarks: a deadline that
passes raises :class:`WaitTimeout`, an ``AssertionError``, which every runner reports
as a failed check. ``CRONSVC_TEST_SLOWDOWN=3`` makes every deadline three times longer
on a machine busy with other work, and what each test checks stays as it is.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any

import redis

from cronsvc.errors import RedisServerError

#: Every deadline waited on is this many times longer (``CRONSVC_TEST_SLOWDOWN``).
SLOWDOWN = float(os.environ.get("CRONSVC_TEST_SLOWDOWN") or 1)


class WaitTimeout(AssertionError):
    """What a test waited for did not happen by its deadline; the message says what."""


def wait_for(predicate: Callable[[], Any], timeout: float = 20.0, interval: float = 0.02,
             message: str = "condition") -> Any:
    """predicate()'s first truthy value, polled every ``interval`` seconds;
    :class:`WaitTimeout` naming ``message`` after ``timeout`` seconds (times
    :data:`SLOWDOWN`)."""
    timeout *= SLOWDOWN
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise WaitTimeout(f"timed out after {timeout}s waiting for {message}")
        time.sleep(interval)


def poll(predicate: Callable[[], Any], timeout: float, what: str) -> Any:
    """predicate() once it is truthy, a Redis error counting as not yet;
    RedisServerError naming ``what`` after ``timeout`` seconds (times
    :data:`SLOWDOWN`): for servers that are starting."""

    def answered() -> Any:
        try:
            return predicate()
        except redis.RedisError:
            return None

    try:
        return wait_for(answered, timeout, interval=0.05, message=what)
    except WaitTimeout as exc:
        raise RedisServerError(str(exc)) from None
