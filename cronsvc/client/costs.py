"""What the record of runs costs in Redis memory (``cronsvc status``): the history lists of
the published jobs, the outputs stored per fire, the live output streams.

Measured with ``MEMORY USAGE`` (Redis' own estimate, sampling a long list's elements).
The outputs and streams are one key per fire, found with ``SCAN``: at most
:data:`SCAN_AT_MOST` of each are looked at, and the figures then say they are a floor.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import islice
from typing import Any

import redis

from cronsvc.keys import Keys
from cronsvc.store.replies import integer

SCAN_AT_MOST = 20_000  # output hashes and live streams looked at, each


@dataclass(frozen=True)
class KeysCost:
    """How many keys of one kind and the bytes they take; ``counted_all`` False when there
    were more than :data:`SCAN_AT_MOST` (the figures are those of the first ones)."""

    keys: int
    bytes: int
    counted_all: bool = True


def runs_memory(client: redis.Redis, shards: Sequence[Keys], jobs: Iterable[str]
                ) -> dict[str, KeysCost] | None:
    """What the ``history``, the ``outputs`` and the ``live`` streams take, or None if this
    user may not ask (``MEMORY`` or ``SCAN`` refused by its ACL)."""
    try:
        history = _cost(client, [k.history(job) for job in jobs for k in shards], True)
        outputs = _scanned(client, [k.output("*") for k in shards])
        live = _scanned(client, [k.live("*") for k in shards])
    except redis.ResponseError:
        return None
    return {"history": history, "outputs": outputs, "live": live}


def _scanned(client: redis.Redis, patterns: list[str]) -> KeysCost:
    found: list[str] = []
    for pattern in patterns:
        found += islice(client.scan_iter(match=pattern, count=1000), SCAN_AT_MOST + 1)
    return _cost(client, found[:SCAN_AT_MOST], len(found) <= SCAN_AT_MOST)


def _cost(client: redis.Redis, keys: list[Any], counted_all: bool) -> KeysCost:
    pipe = client.pipeline(transaction=False)
    for key in keys:
        pipe.memory_usage(key)
    sizes = [integer(x) for x in pipe.execute()] if keys else []
    held = [s for s in sizes if s is not None]  # None: the key is gone (expired, trimmed)
    return KeysCost(len(held), sum(held), counted_all)
