"""Shared fixtures: one real redis-server for the session, flushed before each test; a CA
this process trusts through ``SSL_CERT_FILE`` (read by ``ssl.create_default_context``, so
by every channel and ``http`` job), and server certificates it signed.

Fixtures only; the helpers the tests import are in :mod:`tests.support`.
"""

from __future__ import annotations

import itertools
import ssl
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest
import redis

from cronsvc.process.redis_server import RedisServer
from cronsvc.testing import redis as throwaway
from cronsvc.testing.fleet import fleets_stopped
from tests.support.certs import Issuer, new_ca, server_context, trust_file
from tests.support.servers import server_binary


@pytest.fixture(autouse=True)
def _fleets_stopped() -> Iterator[None]:
    """The processes of every fleet a test made stop with the test, however it ended: a
    planner left running publishes its job file into the next test's Redis (the tests of
    one process share a server)."""
    with fleets_stopped():
        yield


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


@pytest.fixture
def trusted_ca(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Issuer:
    """A CA the channels trust (and no other: not the system's) for this test."""
    ca = new_ca()
    monkeypatch.setenv("SSL_CERT_FILE", str(trust_file(tmp_path, ca)))
    monkeypatch.setenv("SSL_CERT_DIR", str(tmp_path / "no-other-cas"))
    return ca


@pytest.fixture
def trusted_tls(tmp_path: Path, trusted_ca: Issuer) -> ssl.SSLContext:
    """A server context whose certificate, for 127.0.0.1, the trusted CA signed."""
    return server_context(tmp_path, signer=trusted_ca)
