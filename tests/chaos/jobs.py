"""The jobs the chaos scenarios run: each notes its start and its finish in the ledger.

A run lasts a time derived from its fire id, so kills land in the middle of
runs as often as between them, and a rerun of a fire lasts as long as the
first attempt did. ``version`` names the job file the running definition came
from, so the judge can tell a run with the wrong definition.

``python -m tests.chaos.jobs LEDGER LONGEST_MS VERSION`` is the same work as a
command: the scenarios start it as a grandchild of the worker (under ``sh -c
'... & wait'``), the process a worker's death used to leave running.
"""

from __future__ import annotations

import json
import os
import sys
import time
import zlib
from typing import Any

from cronsvc.fires import parse_fire


def append(path: str, event: str, fire: str, attempt: int, worker: str, version: str,
           kind: str, payload: Any = None) -> None:
    """One ledger line (an O_APPEND write of one line is atomic)."""
    line = json.dumps({
        "event": event, "fire": fire, "job": parse_fire(fire)[0], "attempt": attempt,
        "worker": worker, "pid": os.getpid(), "at_ms": time.time_ns() // 1_000_000,
        "scheduled_ms": parse_fire(fire)[1], "version": version, "kind": kind,
        **({"payload": payload} if payload is not None else {}),
    })
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (line + "\n").encode())
    finally:
        os.close(fd)


def duration(fire: str, longest_ms: int) -> float:
    return (zlib.crc32(fire.encode()) % (longest_ms + 1)) / 1000


def work(path: str, longest_ms: int = 300, version: str = "v1", ctx: Any = None) -> None:
    """Append a start line, work for up to ``longest_ms``, append a finish line."""
    note = (ctx.fire_id, ctx.attempt, ctx.worker, version, "call", ctx.payload)
    append(path, "start", *note)
    time.sleep(duration(ctx.fire_id, longest_ms))
    append(path, "end", *note)


def main(argv: list[str]) -> None:
    path, longest_ms, version = argv[0], int(argv[1]), argv[2]
    fire = os.environ["CRONSVC_FIRE_ID"]
    note = (fire, int(os.environ["CRONSVC_ATTEMPT"]), os.environ["CRONSVC_WORKER"], version,
            "command")
    append(path, "start", *note)
    time.sleep(duration(fire, longest_ms))
    append(path, "end", *note)


if __name__ == "__main__":
    main(sys.argv[1:])
