"""Polling with a deadline, never a bare sleep; and the Redis server's clock, which
scripts read and tests often wait on."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any

import pytest
import redis

from cronsvc.clock import redis_ms
from cronsvc.errors import RedisServerError

#: Every deadline a test waits on is this many times longer: a machine busy with other work
#: (two suites at once, a CPU hog) sets it, and what each test checks stays as it is.
SLOWDOWN = float(os.environ.get("CRONSVC_TEST_SLOWDOWN") or 1)


def wait_for(predicate: Callable[[], Any], timeout: float = 20.0, interval: float = 0.02,
             message: str = "condition") -> Any:
    """Poll until predicate() is truthy; fail with message after timeout (times
    :data:`SLOWDOWN`)."""
    timeout *= SLOWDOWN
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout}s waiting for {message}", pytrace=False)
        time.sleep(interval)


def poll(predicate: Callable[[], Any], timeout: float, what: str) -> Any:
    """predicate() once it is truthy, a Redis error counting as not yet;
    RedisServerError naming ``what`` after ``timeout`` times :data:`SLOWDOWN` (for
    starting servers)."""
    timeout *= SLOWDOWN
    deadline = time.monotonic() + timeout
    while True:
        try:
            value = predicate()
        except redis.RedisError:
            value = None
        if value:
            return value
        if time.monotonic() > deadline:
            raise RedisServerError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.05)


def server_ms(r: redis.Redis) -> int:
    """The Redis server's clock (TIME) in ms."""
    return redis_ms(r)


def wait_server_past(r: redis.Redis, ms: int) -> None:
    """Wait until the Redis server's clock is past ``ms``."""
    wait_for(lambda: server_ms(r) > ms, message=f"the Redis clock to pass {ms}")
