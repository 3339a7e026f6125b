"""Polling with a deadline for pytest: :func:`cronsvc.testing.wait_for` whose timeout
fails the test with its message alone (no traceback of the polling loop); and the Redis
server's clock, which scripts read and tests often wait on."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import redis

from cronsvc import testing
from cronsvc.clock import redis_ms


def wait_for(predicate: Callable[[], Any], timeout: float = 20.0, interval: float = 0.02,
             message: str = "condition") -> Any:
    """:func:`cronsvc.testing.wait_for`, failing the test on a timeout."""
    try:
        return testing.wait_for(predicate, timeout, interval, message)
    except testing.WaitTimeout as exc:
        raise pytest.fail.Exception(str(exc), pytrace=False) from None


def server_ms(r: redis.Redis) -> int:
    """The Redis server's clock (TIME) in ms."""
    return redis_ms(r)


def wait_server_past(r: redis.Redis, ms: int) -> None:
    """Wait until the Redis server's clock is past ``ms``."""
    wait_for(lambda: server_ms(r) > ms, message=f"the Redis clock to pass {ms}")
