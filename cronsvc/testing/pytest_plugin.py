"""pytest fixtures for testing a job file end to end: ``cronsvc_redis`` and
``cronsvc_fleet``.

This module needs pytest, which cronsvc does not depend on; the rest of
:mod:`cronsvc.testing` does not. Enable it with ``-p cronsvc.testing.pytest_plugin``
on the command line, or ``pytest_plugins = ["cronsvc.testing.pytest_plugin"]`` in the
top ``conftest.py``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from cronsvc.errors import RedisServerError
from cronsvc.process.redis_server import RedisServer, find_redis_server
from cronsvc.testing.fleet import Fleet
from cronsvc.testing.redis import flushed, redis_server


@pytest.fixture(scope="session")
def cronsvc_redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    """One real redis-server for the session (see :mod:`cronsvc.testing.redis`)."""
    try:
        binary = find_redis_server()
    except RedisServerError as exc:  # the one line that says what to install
        raise pytest.fail.Exception(str(exc), pytrace=False) from None
    with redis_server(tmp_path_factory.mktemp("cronsvc-redis"), binary=binary) as server:
        yield server


@pytest.fixture
def cronsvc_redis(cronsvc_redis_server: RedisServer) -> str:
    """The URL of the session's redis-server, emptied for this test."""
    return flushed(cronsvc_redis_server.url)


@pytest.fixture
def cronsvc_fleet(tmp_path: Path, cronsvc_redis: str) -> Iterator[Fleet]:
    """A :class:`~cronsvc.testing.Fleet` in ``tmp_path`` with no jobs yet; every process
    it started is stopped after the test, and their logs are printed (pytest shows them
    when the test failed)."""
    fleet = Fleet(tmp_path, cronsvc_redis, {})
    yield fleet
    fleet.stop_all()
    print(fleet.logs())
