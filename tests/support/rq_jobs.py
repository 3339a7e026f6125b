"""Functions a real ``rq worker`` runs in the tests, through
:class:`cronsvc.contrib.rq.GuardedJob`: each run is a line in the ledger file it is given
(``CRONSVC_TEST_LEDGER``), with the fire ``cronsvc.current()`` gave it."""

from __future__ import annotations

from rq import get_current_job

from tests.support.queues import note_run, traceparent_now


def _note(**what: object) -> None:
    job = get_current_job()
    note_run(job_id=job and job.id, **what)


def digest(team: str, size: int = 0) -> str:
    _note(func="digest", team=team, size=size)
    return f"digest for {team}"


def broken(team: str) -> None:
    _note(func="broken", team=team)
    raise RuntimeError(f"no digest for {team}")


def traced() -> str:
    """Note the traceparent it runs under (the guard's, from the job's meta)."""
    _note(func="traced", current=traceparent_now())
    return "traced"
