"""The redis-server binary the tests run: found, or the test skipped (failed under CI)."""

from __future__ import annotations

import os

import pytest

from cronsvc.errors import RedisServerError
from cronsvc.process.redis_server import find_redis_server


def server_binary() -> str:
    """The path of redis-server; skips the test without one (fails it when ``CI=true``)."""
    try:
        return find_redis_server()
    except RedisServerError as exc:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI=true and {exc}", pytrace=False)
        pytest.skip(str(exc))
