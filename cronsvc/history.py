"""The history record: one JSON line per attempt or decision, in a job's history list.

Fields, in this order (JSON null where there is no value)::

    fire, job, status, reason, scheduled, started, duration_ms, attempt, worker,
    exit_code, output

- ``status``: ``ok``, ``failed``, ``timeout``, ``cancelled``, ``replaced``,
  ``shutdown`` or ``lease lost`` (a run); ``lost`` (an attempt whose lease lapsed
  before its result was recorded); ``dead``, ``missed`` or ``skipped`` (a fire the
  claim script did not run, or ran out of attempts); ``backfill`` (the line a backfill
  writes: who asked, how many fires, the range; cronsvc/client/backfill.py); ``chained``
  (a fire queued by the end of another: the reason names that fire and how it ended).
- ``scheduled`` and ``started``: ms since the epoch, UTC, on the Redis clock.

:func:`record` is the only builder in Python; ``lua/fail-14.lua`` writes the same
fields for a dead fire. The reasons a fire is dropped or a run is stopped are
:class:`Drop` and :class:`Cancel`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from enum import StrEnum
from json.encoder import encode_basestring_ascii
from typing import Any, TypedDict

from cronsvc.fires import parse_fire

#: The most records a job's history keeps (its cap, ``history:``), so the most a listing
#: reads of it.
HISTORY_MAX = 100_000


class HistoryRecord(TypedDict):
    fire: str
    job: str
    status: str
    reason: str | None
    scheduled: int | None
    started: int | None
    duration_ms: int | None
    attempt: int | None
    worker: str | None
    exit_code: int | None
    output: str | None


def record(fire: str, status: str, *, reason: str | None = None, started: int | None = None,
           duration_ms: int | None = None, attempt: int | None = None,
           worker: str | None = None, exit_code: int | None = None,
           output: str | None = None, job: str | None = None,
           scheduled: int | None = None) -> HistoryRecord:
    """A history record; ``job`` and ``scheduled`` default to those of the fire id."""
    if job is None or scheduled is None:
        fire_job, due_ms, _ = parse_fire(fire)
        job = fire_job if job is None else job
        scheduled = due_ms if scheduled is None else scheduled
    # A literal, in FIELDS order: a worker makes one per run, and calling the TypedDict
    # with keywords takes longer.
    return {"fire": fire, "job": job, "status": status, "reason": reason,
            "scheduled": scheduled, "started": started, "duration_ms": duration_ms,
            "attempt": attempt, "worker": worker, "exit_code": exit_code, "output": output}


FIELDS = tuple(HistoryRecord.__annotations__)


def encoded(r: Mapping[str, Any]) -> str | None:
    """The JSON of a record as ``json`` writes it (no spaces, ASCII), written field by
    field: a worker writes one per run and the generic encoder takes twice as long. None
    for a mapping that is not a record of :data:`FIELDS` in order holding strings, ints
    and nulls (the caller then encodes it the generic way)."""
    try:
        values = r.values()
        if len(values) != len(FIELDS) or tuple(r) != FIELDS:
            return None
    except TypeError:  # not a mapping
        return None
    return encoded_run(*values)


def encoded_run(fire: str, job: str, status: str, reason: str | None, scheduled: int | None,
                started: int | None, duration_ms: int | None, attempt: int | None,
                worker: str | None, exit_code: int | None, output: str | None) -> str | None:
    """:func:`encoded` of the record ``record(fire, status, job=job, ...)`` of these
    values, written without making the record (a worker acks many runs a second). None
    where a value is not of the type these say (the caller then encodes it the generic
    way)."""
    for v in (scheduled, started, duration_ms, attempt, exit_code):
        if v is not None and v.__class__ is not int:  # a bool is JSON true, a float its repr
            return None
    try:
        return (f'{{"fire":{_str(fire)},"job":{_str(job)},"status":{_str(status)},'
                f'"reason":{"null" if reason is None else _str(reason)},'
                f'"scheduled":{"null" if scheduled is None else _int(scheduled)},'
                f'"started":{"null" if started is None else _int(started)},'
                f'"duration_ms":{"null" if duration_ms is None else _int(duration_ms)},'
                f'"attempt":{"null" if attempt is None else _int(attempt)},'
                f'"worker":{"null" if worker is None else _str(worker)},'
                f'"exit_code":{"null" if exit_code is None else _int(exit_code)},'
                f'"output":{"null" if output is None else _str(output)}}}')
    except TypeError:  # a text value that is not a str
        return None


def encoded_plain(fire: str, job: str, status: str, scheduled: int, started: int,
                  duration_ms: int, attempt: int, worker: str) -> str:
    """:func:`encoded_run` of a run with no reason, exit code nor output (most runs), its
    numbers ints: the same text, written the short way. TypeError for a text value that is
    not a str."""
    return (f'{{"fire":{_str(fire)},"job":{_str(job)},"status":{_str(status)},'
            f'"reason":null,"scheduled":{scheduled},"started":{started},'
            f'"duration_ms":{duration_ms},"attempt":{attempt},"worker":{_str(worker)},'
            '"exit_code":null,"output":null}')


_str = encode_basestring_ascii  # TypeError for what is not a str
_int = int.__repr__


class Drop(StrEnum):
    """Why the claim script did not run a fire: its reply and its events say these."""

    REMOVED = "removed"
    SCHEDULE_REMOVED = "schedule removed"  # its runtime schedule was deleted or changed job
    PAUSED = "paused"
    MISSED = "missed"
    CATCH_UP_LATEST = "catch_up latest"
    OVERLAP_FORBID = "overlap forbid"
    DEAD = "dead"  # its lease lapsed on the last attempt
    DEAD_JOB_REMOVED = "dead: job removed"  # ... after its job was removed
    DEFINITION_NOT_HELD = "definition not held"  # no worker holding its definition took it

    @property
    def status(self) -> str:
        """The status of the history record: missed, dead, or skipped by policy."""
        return _DROP_STATUS.get(self, "skipped")

    @property
    def explained(self) -> str:
        """The reason as the history record says it."""
        return _DROP_EXPLAINED.get(self, self.value)


_DROP_STATUS = {Drop.MISSED: "missed", Drop.DEAD: "dead", Drop.DEAD_JOB_REMOVED: "dead",
                Drop.DEFINITION_NOT_HELD: "missed"}
_DROP_EXPLAINED = {
    Drop.DEAD: "no attempts left: lease lost on the last attempt (its worker died or lost Redis)",
    Drop.DEFINITION_NOT_HELD: "missed: no live worker holds this definition of the job "
                              "(their job files differ)",
}


#: A fire held back for a free slot (``overlap: queue``) says so once: ``queued behind FIRE``.
QUEUED_BEHIND = "queued behind "


def drop_status(reason: str) -> str:
    """The history status of a drop reason (an unknown reason is a skip by policy, and a
    fire held back until a slot is free is ``queued``)."""
    if reason.startswith(QUEUED_BEHIND):
        return "queued"
    try:
        return Drop(reason).status
    except ValueError:
        return "skipped"


def drop_explained(reason: str) -> str:
    """A drop reason as the history record says it (an unknown one as it is)."""
    try:
        return Drop(reason).explained
    except ValueError:
        return reason


class Cancel(StrEnum):
    """Why a worker stops a run it holds: the run's status in its history record."""

    REPLACED = "replaced"  # overlap: replace, a newer fire of the job took over
    LEASE_LOST = "lease lost"  # the lease lapsed or another worker holds the fire now
    SHUTDOWN = "shutdown"  # the worker is stopping and its grace period ran out



def in_order(newest_first: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """One fire's records (as its job's history list holds them: newest first) in the order
    they happened, attempts numbered on across a retry by hand.

    The list's order is the order things were written: a dead letter's cause, then its
    ``dead`` line. A dead fire retried by hand starts again at token 1 (its fencing token
    and its budget of attempts restart); its attempts are numbered after those before, so
    a fire reads attempt 1, 2 dead, 3, not 1, 2, 1.
    """
    ordered: list[dict[str, Any]] = []
    before = highest = 0  # attempts of the earlier rounds; the highest of this one
    for r in reversed(list(newest_first)):
        attempt = r.get("attempt")
        if isinstance(attempt, int) and not isinstance(attempt, bool):
            if ordered and ordered[-1].get("status") == "dead" and r.get("status") != "dead":
                before, highest = before + highest, 0
            highest = max(highest, attempt)
            r = {**r, "attempt": before + attempt}
        ordered.append(dict(r))
    return ordered


def newest_fires(newest_first: Iterable[Mapping[str, Any]], count: int) -> list[Any]:
    """Every record of the newest ``count`` fires among ``newest_first`` (a job's history,
    newest first), in that order: a listing of N fires never cuts one's attempts off."""
    fires: set[Any] = set()
    kept = []
    for r in newest_first:
        fire = r.get("fire")
        if fire not in fires:
            if len(fires) == count:
                continue
            fires.add(fire)
        kept.append(r)
    return kept
