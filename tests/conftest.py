"""Shared fixtures: one real redis-server for the session, flushed before each test."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from cronsvc.errors import RedisServerError
from cronsvc.process.redis_server import RedisServer, find_redis_server

ROOT = Path(__file__).resolve().parent.parent


def _server_binary() -> str:
    try:
        return find_redis_server()
    except RedisServerError as exc:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI=true and {exc}", pytrace=False)
        pytest.skip(str(exc))


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    server = RedisServer(tmp_path_factory.mktemp("redis"), binary=_server_binary())
    server.start()
    yield server
    server.stop()


@pytest.fixture
def redis_url(redis_server: RedisServer) -> str:
    client = redis.Redis.from_url(redis_server.url)
    client.flushall()
    client.script_flush()
    client.close()
    return redis_server.url


@pytest.fixture
def r(redis_url: str) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    yield client
    client.close()


@pytest.fixture
def fresh_server(tmp_path: Path) -> Iterator[Callable[..., RedisServer]]:
    """Start extra servers of a test's own (restarts, AOF, passwords); all stopped after."""
    started: list[RedisServer] = []
    binary = _server_binary()

    def start(**kwargs: Any) -> RedisServer:
        server = RedisServer(tmp_path / f"redis{len(started)}", binary=binary, **kwargs)
        started.append(server)
        return server.start()

    yield start
    for server in started:
        server.stop()


def wait_for(predicate: Callable[[], Any], timeout: float = 20.0, interval: float = 0.02,
             message: str = "condition") -> Any:
    """Poll until predicate() is truthy; fail with message after timeout."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout}s waiting for {message}", pytrace=False)
        time.sleep(interval)
