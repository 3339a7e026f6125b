"""The redis-server binary the tests run: found, or the test skipped (failed under CI)."""

from __future__ import annotations

from cronsvc.errors import RedisServerError
from cronsvc.process.redis_server import find_redis_server
from tests.support.parts import missing


def server_binary() -> str:
    """The path of redis-server; skips the test without one (fails it when ``CI=true``)."""
    try:
        return find_redis_server()
    except RedisServerError as exc:
        missing(str(exc))
