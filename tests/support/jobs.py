"""Job functions the end-to-end tests run inside real worker processes.

Each run appends one JSON line to a ledger file (O_APPEND writes of one line
are atomic), so the tests can check what ran, where and how often, outside
Redis.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any


def _append(path: str, event: str, ctx: Any, **extra: Any) -> None:
    line = json.dumps({
        "event": event, "fire": ctx.fire_id, "job": ctx.job, "attempt": ctx.attempt,
        "worker": ctx.worker, "pid": os.getpid(), "at_ms": time.time_ns() // 1_000_000,
        "scheduled_ms": ctx.scheduled_ms, "payload": ctx.payload,
        "schedule": getattr(ctx, "schedule", None), **extra,
    })
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (line + "\n").encode())
    finally:
        os.close(fd)


def record(path: str, ctx: Any = None) -> None:
    """Note the start of the run and return at once."""
    _append(path, "start", ctx)


def tagged(path: str, tag: str, ctx: Any = None) -> None:
    """Note the start with ``tag`` (which definition of the job ran) and return at once."""
    _append(path, "start", ctx, tag=tag)


def fail(message: str, ctx: Any = None) -> None:
    """Fail with ``message``: the error its run records."""
    raise RuntimeError(message)


def block(path: str, release: str, ctx: Any = None, limit: float = 60.0) -> None:
    """Note the start, then hold the slot until the file ``release`` exists."""
    _append(path, "start", ctx)
    _until_exists(Path(release), limit)
    _append(path, "end", ctx)


def hold(path: str, releases: str, ctx: Any = None, limit: float = 60.0) -> None:
    """Note the start, hold the slot until the file ``releases/<fire id>`` exists (each run
    is let go on its own), then note the end."""
    _append(path, "start", ctx)
    _until_exists(Path(releases) / ctx.fire_id.replace("/", "_"), limit)
    _append(path, "end", ctx)


def _until_exists(release: Path, limit: float) -> None:
    deadline = time.monotonic() + limit
    while not release.exists():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{release} never appeared")
        time.sleep(0.02)  # a job that waits for a signal from the test, not a test wait


def read_ledger(path: str | Path) -> list[dict[str, Any]]:
    try:
        text = Path(path).read_text()
    except FileNotFoundError:
        return []
    return [json.loads(line) for line in text.splitlines() if line.strip()]
