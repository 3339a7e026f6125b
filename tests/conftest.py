"""Shared fixtures: one real redis-server for the session, flushed before each test.

Fixtures only; the helpers the tests import are in :mod:`tests.support`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from cronsvc.process.redis_server import RedisServer
from tests.support.servers import server_binary


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    server = RedisServer(tmp_path_factory.mktemp("redis"), binary=server_binary())
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
    binary = server_binary()

    def start(**kwargs: Any) -> RedisServer:
        server = RedisServer(tmp_path / f"redis{len(started)}", binary=binary, **kwargs)
        started.append(server)
        return server.start()

    yield start
    for server in started:
        server.stop()
