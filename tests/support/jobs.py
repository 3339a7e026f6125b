"""Job functions only cronsvc's own tests run inside real worker processes; the ones
any fleet may use (``record``, ``block``) are in :mod:`cronsvc.testing.ledger`, which
these write to as well."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cronsvc.testing.ledger import note, until_exists


def tagged(path: str, tag: str, ctx: Any = None) -> None:
    """Note the start with ``tag`` (which definition of the job ran) and return at once."""
    note(path, "start", ctx, tag=tag)


def fail(message: str, ctx: Any = None) -> None:
    """Fail with ``message``: the error its run records."""
    raise RuntimeError(message)


def hold(path: str, releases: str, ctx: Any = None, limit: float = 60.0) -> None:
    """Note the start, hold the slot until the file ``releases/<fire id>`` exists (each run
    is let go on its own), then note the end."""
    note(path, "start", ctx)
    until_exists(Path(releases) / ctx.fire_id.replace("/", "_"), limit)
    note(path, "end", ctx)
