"""``async def`` targets (and targets that print and log) for `call` jobs, run in the test
process (tests/run/test_async_calls.py) and by the workers of tests/features/test_async.py.
Those taking ``path`` note their runs in a ledger (:mod:`cronsvc.testing.ledger`)."""

from __future__ import annotations

import asyncio
import functools
import logging
import sys
from pathlib import Path
from typing import Any

from cronsvc import current, stopping
from cronsvc.testing.ledger import note, until_exists

log = logging.getLogger("tests.jobs")


async def returns(path: str | None = None, ctx: Any = None) -> dict[str, Any]:
    """Awaits once, then returns what it saw of its fire."""
    await asyncio.sleep(0)
    if path:
        note(path, "start", ctx)
    return {"fire": ctx.fire_id, "current": current() is ctx}


async def _released(release: Path, limit: float = 60.0) -> None:
    for _ in range(int(limit / 0.02)):
        if release.exists():
            return
        await asyncio.sleep(0.02)  # a job waiting for the test, not a test wait
    raise TimeoutError(f"{release} never appeared")


async def held(path: str, releases: str, ctx: Any = None) -> str:
    """Note the start, await the file ``releases/<fire id>``, note the end. Its ``finally``
    notes "finally", and "cancelled" when the task was cancelled."""
    note(path, "start", ctx)
    try:
        await _released(Path(releases) / ctx.fire_id)
        note(path, "end", ctx)
        return "released"
    except asyncio.CancelledError:
        note(path, "cancelled", ctx, stopping=stopping())
        raise
    finally:
        note(path, "finally", ctx)


async def crowd(path: str, release: str, ctx: Any = None) -> None:
    """Note the start, await the one file ``release`` with every other run, note the end."""
    note(path, "start", ctx)
    await _released(Path(release))
    note(path, "end", ctx)


def _chatter(tag: str, path: str | None, ctx: Any) -> None:
    print(f"{tag}: printed")
    print(f"{tag}: to stderr", file=sys.stderr)
    log.warning("%s: logged", tag)
    ctx.log("rows", tag=tag, n=42)
    if path:
        note(path, "start", ctx)


async def chatty(tag: str, release: str, path: str | None = None, ctx: Any = None) -> str:
    """Print, log and ``ctx.log`` lines naming ``tag``, await ``release``, print again."""
    _chatter(tag, path, ctx)
    await _released(Path(release))
    print(f"{tag}: after the wait")
    return tag


def chatty_sync(tag: str, release: str, path: str | None = None, ctx: Any = None) -> str:
    """:func:`chatty` in a worker's slot thread."""
    _chatter(tag, path, ctx)
    until_exists(Path(release), 60.0)
    print(f"{tag}: after the wait")
    return tag


async def boom() -> None:
    print("about to fail")
    raise ValueError("async bad thing")


async def _double(x: int) -> int:
    await asyncio.sleep(0)
    return 2 * x


#: A partial of an async function: async too.
partial_double = functools.partial(_double, 21)


def returns_coroutine() -> Any:
    """A sync function that returns a coroutine: awaited on the loop all the same."""
    return _double(5)
