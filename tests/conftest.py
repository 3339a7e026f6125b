"""Shared fixtures: one real redis-server for the session, flushed before each test.

Fixtures only; the helpers the tests import are in :mod:`tests.support`.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest
import redis

from cronsvc.process.redis_server import RedisServer
from cronsvc.testing import redis as throwaway
from tests.support.servers import server_binary


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    with throwaway.redis_server(tmp_path_factory.mktemp("redis"),
                                binary=server_binary()) as server:
        yield server


@pytest.fixture
def redis_url(redis_server: RedisServer) -> str:
    return throwaway.flushed(redis_server.url)


@pytest.fixture
def r(redis_url: str) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    yield client
    client.close()


@pytest.fixture
def fresh_server(tmp_path: Path) -> Iterator[Callable[..., RedisServer]]:
    """Start extra servers of a test's own (restarts, AOF, passwords); all stopped after."""
    binary = server_binary()
    numbers = itertools.count()
    with ExitStack() as started:

        def start(**kwargs: Any) -> RedisServer:
            data_dir = tmp_path / f"redis{next(numbers)}"
            return started.enter_context(
                throwaway.redis_server(data_dir, binary=binary, **kwargs))

        yield start
