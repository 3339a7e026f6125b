"""Functions a real ``rq worker`` runs in the tests, through
:class:`cronsvc.contrib.rq.GuardedJob`: each run is a line in the ledger file it is given
(``CRONSVC_TEST_LEDGER``), with the fire ``cronsvc.current()`` gave it."""

from __future__ import annotations

import json
import os

from rq import get_current_job

import cronsvc


def _note(**what: object) -> None:
    ctx = cronsvc.current()
    job = get_current_job()
    line = {"fire": ctx and ctx.fire_id, "attempt": ctx and ctx.attempt,
            "payload": ctx and ctx.payload, "job_id": job and job.id, "pid": os.getpid(),
            **what}
    with open(os.environ["CRONSVC_TEST_LEDGER"], "a") as f:
        f.write(json.dumps(line) + "\n")


def digest(team: str, size: int = 0) -> str:
    _note(func="digest", team=team, size=size)
    return f"digest for {team}"


def broken(team: str) -> None:
    _note(func="broken", team=team)
    raise RuntimeError(f"no digest for {team}")
