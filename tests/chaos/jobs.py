"""The job the chaos scenarios run: it notes its start and its finish in the ledger.

A run lasts a time derived from its fire id, so kills land in the middle of
runs as often as between them, and a rerun of a fire lasts as long as the
first attempt did.
"""

from __future__ import annotations

import time
import zlib
from typing import Any

from tests.e2e_jobs import _append


def work(path: str, longest_ms: int = 300, ctx: Any = None) -> None:
    """Append a start line, work for up to ``longest_ms``, append a finish line."""
    _append(path, "start", ctx)
    time.sleep((zlib.crc32(ctx.fire_id.encode()) % (longest_ms + 1)) / 1000)
    _append(path, "end", ctx)
