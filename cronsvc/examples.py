"""Small, harmless callables for the example ``schedules.yaml`` and for tests."""

from __future__ import annotations

import logging
from typing import Any

log = logging.getLogger(__name__)


def ping(target: str = "self", ctx: Any = None) -> str:
    """Return at once with a line naming the fire: proof that a ``call`` job ran."""
    fire = getattr(ctx, "fire_id", "manual")
    attempt = getattr(ctx, "attempt", 1)
    message = f"pong from {target} ({fire}, attempt {attempt})"
    log.info(message)
    return message
