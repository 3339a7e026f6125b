"""Targets of `call` jobs (sync and async) and a `command` that note, as they start, the
Redis server's clock, the fire's due time and the time its claim was made (from its claim
in ``cron:claims``): what tests/worker/test_claim_ahead.py checks a start against.

Each pushes a JSON line onto the list ``key`` of the Redis at ``url``:
``{"fire", "due", "server", "claimed_at"}`` (ms; ``server`` read after the start)."""

from __future__ import annotations

import json
import os
import sys

import redis

from cronsvc import current
from cronsvc.fires import parse_fire
from cronsvc.keys import Keys


def note(url: str, key: str, fid: str | None = None) -> None:
    """Note the start of the running fire (``fid``: a command's, from its environment)."""
    if fid is None:
        ctx = current()
        assert ctx is not None
        fid = ctx.fire_id
    r = redis.Redis.from_url(url, decode_responses=True)
    try:
        sec, usec = r.time()
        server = int(sec) * 1000 + int(usec) / 1000
        claim = json.loads(r.hget(Keys().claims, fid) or "{}")
        r.rpush(key, json.dumps({"fire": fid, "due": parse_fire(fid)[1], "server": server,
                                 "claimed_at": claim.get("claimed_at")}))
    finally:
        r.close()


async def note_async(url: str, key: str) -> None:
    note(url, key)  # (blocks the loop a moment: a test's)


def command(url: str, key: str) -> list[str]:
    """A command job's argv that notes its start as :func:`note` does."""
    return [sys.executable, __file__, url, key]


if __name__ == "__main__":
    note(sys.argv[1], sys.argv[2], os.environ["CRONSVC_FIRE_ID"])
