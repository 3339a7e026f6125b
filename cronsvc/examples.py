"""Small, harmless callables for the example ``schedules.yaml`` and for tests, and an
async job declared in Python: the example file's ``discover:`` names this module."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import cronsvc

log = logging.getLogger(__name__)


def ping(target: str = "self", ctx: Any = None) -> str:
    """Return at once with a line naming the fire: proof that a ``call`` job ran."""
    fire = getattr(ctx, "fire_id", "manual")
    attempt = getattr(ctx, "attempt", 1)
    message = f"pong from {target} ({fire}, attempt {attempt})"
    log.info(message)
    return message


@cronsvc.job("0 9 * * 1", timezone="Europe/Berlin", overlap="forbid", retries=1,
             timeout="5m", description="Declared in Python, async, beside its function.")
async def weekly_report(ctx: Any = None) -> str:
    """A job of the example fleet declared here rather than in the job file, and async:
    the worker awaits it on its event loop, holding no thread while it waits."""
    await asyncio.sleep(0.05)  # stands in for the I/O a report waits on
    print("the week's report is written")
    return ping("weekly-report", ctx)
