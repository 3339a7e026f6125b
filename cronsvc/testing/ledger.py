"""Job functions that note each run in a ledger file, for a fleet under test.

A ``call`` job runs them inside a real worker, by dotted path
(``cronsvc.testing.ledger:record``), so a test reads what ran, where, which attempt
and how often, from a file outside Redis: not from the store it is checking. Each run
appends one JSON line (an ``O_APPEND`` write of one line is atomic), so workers share
one ledger.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

#: The dotted paths a ``call`` job names.
RECORD = "cronsvc.testing.ledger:record"
BLOCK = "cronsvc.testing.ledger:block"


def note(path: str, event: str, ctx: Any, **extra: Any) -> None:
    """Append one line: ``event``, the fire and the worker from ``ctx``, the pid, the
    time (``at_ms``) and ``extra``."""
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
    note(path, "start", ctx)


def release_of(path: str) -> str:
    """The file whose creation lets :func:`block`'s runs on the ledger ``path`` go."""
    return f"{path}.release"


def block(path: str, release: str | None = None, ctx: Any = None,
          limit: float = 60.0) -> None:
    """Note the start, hold the worker's slot until the file ``release`` (by default
    :func:`release_of` the ledger) exists, then note the end: a run that is still
    running when a test kills its worker or stops its fleet."""
    note(path, "start", ctx)
    until_exists(Path(release or release_of(path)), limit)
    note(path, "end", ctx)


def until_exists(release: Path, limit: float) -> None:
    """Return once ``release`` exists; TimeoutError after ``limit`` seconds, so a run
    the test forgot to let go ends on its own."""
    deadline = time.monotonic() + limit
    while not release.exists():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{release} never appeared")
        time.sleep(0.02)  # a job waiting for a signal from the test, not a test wait


def read_ledger(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Every line of the ledger, oldest first; none before the first run."""
    try:
        text = Path(path).read_text()
    except FileNotFoundError:
        return []
    return [json.loads(line) for line in text.splitlines() if line.strip()]
