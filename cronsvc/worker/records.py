"""What a run leaves behind: its history record and its console line."""

from __future__ import annotations

import logging
from typing import Any

from cronsvc.clock import iso_utc
from cronsvc.history import (
    HistoryRecord,
    drop_explained,
    drop_status,
    encoded_plain,
    encoded_run,
    record,
)
from cronsvc.process.logs import LineWriter
from cronsvc.run.outcome import Outcome
from cronsvc.run.output import excerpt
from cronsvc.store.replies import record_json
from cronsvc.store.scripts import Claim


def started_on_server(outcome: Outcome, offset_ms: int, due_ms: int) -> int:
    """When a run started on the server's clock: its start on this machine's plus the
    offset of the last claim. That offset errs by up to a ms and half a round trip, which
    could put the start before its due time; no run starts before it by the server's clock
    (one claimed ahead waits for a time the server's clock has surely reached,
    cronsvc/worker/server_time.py), so the start is taken as at least its due time, in the
    record and in the lag alike."""
    started = outcome.started_ms + offset_ms
    return due_ms if started < due_ms else started


def history_record(
    claim: Claim, outcome: Outcome, worker: str, offset_ms: int, *, status: str | None = None
) -> HistoryRecord:
    """The history line of one finished attempt, times on the server's clock; it holds
    the end of the output (the whole of what the run kept is stored beside it)."""
    return record(claim.fire_id, status or outcome.status, job=claim.job, scheduled=claim.due_ms,
                  reason=outcome.error, started=started_on_server(outcome, offset_ms, claim.due_ms),
                  duration_ms=outcome.duration_ms, attempt=claim.token, worker=worker,
                  exit_code=outcome.exit_code, output=excerpt(outcome.output) or None)


def history_json(claim: Claim, outcome: Outcome, worker: str, offset_ms: int, status: str
                 ) -> str:
    """The JSON of :func:`history_record` as stored, written without the record (a worker
    acks many runs a second)."""
    fid, due, token = claim.fire_id, claim.due_ms, claim.token
    started, took = started_on_server(outcome, offset_ms, due), outcome.duration_ms
    if (outcome.error is None and outcome.exit_code is None and not outcome.output
            and due.__class__ is int and started.__class__ is int
            and took.__class__ is int and token.__class__ is int):
        # most runs: no reason, exit code or output (encoded_run's text of them)
        try:
            return encoded_plain(fid, claim.job, status, due, started, took, token, worker)
        except TypeError:  # a text value that is not a str: the record's own way
            pass
    text = encoded_run(fid, claim.job, status, outcome.error, due, started, took, token,
                       worker, outcome.exit_code, excerpt(outcome.output) or None)
    if text is None:  # a value of another type: the record's own way
        return record_json(history_record(claim, outcome, worker, offset_ms, status=status))
    return text


def drop_record(fid: str, reason: str, worker: str) -> HistoryRecord:
    """The history line of a fire the claim script decided not to run."""
    return record(fid, drop_status(reason), reason=drop_explained(reason), worker=worker)


def log_outcome(
    log: logging.Logger, worker: str, claim: Claim, outcome: Outcome, lag_ms: int, note: str = "",
    write: LineWriter | None = None,
) -> None:
    """The run's line: INFO for a success, else a WARNING. ``write`` (from
    :func:`~cronsvc.process.logs.line_writer`) writes an INFO line without logging's
    machinery, the same line."""
    if outcome.status == "ok" and write is not None:
        fields = run_fields(claim, worker)
        try:
            if not note:
                line = ok_line(claim, outcome, lag_ms)
                if line is not None:
                    return write(line, fields)
            return write(RUN_LINE % _args(claim, outcome, lag_ms, note), fields)
        except Exception:  # logging's way reports it (Handler.handleError)
            pass
    log.log(logging.INFO if outcome.status == "ok" else logging.WARNING, RUN_LINE,
            *_args(claim, outcome, lag_ms, note), extra=run_fields(claim, worker))


def run_fields(claim: Claim, worker: str) -> dict[str, Any]:
    """The fields of a run's line (:data:`~cronsvc.process.logs.RUN_FIELDS`)."""
    return {"job": claim.job, "fire": claim.fire_id, "attempt": claim.token, "worker": worker}


def ok_line(claim: Claim, outcome: Outcome, lag_ms: int) -> str | None:
    """The run line of most successes, with nothing after the times (:data:`OK_LINE`); None
    for a run whose line says more (a status, an exit code, an error)."""
    if outcome.status != "ok" or outcome.error or outcome.exit_code not in (None, 0):
        return None
    token, took = claim.token, outcome.duration_ms
    if token.__class__ is int and took.__class__ is int and lag_ms.__class__ is int:
        # OK_LINE's text, the quicker way (%d of an int is its digits)
        return (f"ok {claim.fire_id} attempt={token} scheduled={_scheduled(claim.due_ms)} "
                f"lag={lag_ms}ms took={took}ms")
    return OK_LINE % (claim.fire_id, token, _scheduled(claim.due_ms), lag_ms, took)


def _args(claim: Claim, outcome: Outcome, lag_ms: int, note: str) -> tuple[Any, ...]:
    """The values of :data:`RUN_LINE` for a run."""
    extra = f" exit={outcome.exit_code}" if outcome.exit_code not in (None, 0) else ""
    error = f" error={outcome.error!r}" if outcome.error else ""
    return (outcome.status, claim.fire_id, claim.token, _scheduled(claim.due_ms), lag_ms,
            outcome.duration_ms, extra, error, f" ({note})" if note else "")


RUN_LINE = "%s %s attempt=%d scheduled=%s lag=%dms took=%dms%s%s%s"
#: RUN_LINE of a success with no exit code, error or note.
OK_LINE = "ok %s attempt=%d scheduled=%s lag=%dms took=%dms"
_seconds: dict[int, str] = {}  # due second -> its ISO time without the Z: a run line each
_dues: dict[int, str] = {}  # due time -> its ISO time (many fires are due at once)


def _scheduled(ms: int) -> str:
    """:func:`iso_utc` of a due time, remembered (its strftime is most of the cost, and a
    batch holds many fires of a second, most due at the same time)."""
    text = _dues.get(ms)
    if text is not None:
        return text
    if not 0 <= ms < _YEAR_9000:
        return iso_utc(ms)
    second, milli = divmod(ms, 1000)
    head = _seconds.get(second)
    if head is None:
        if len(_seconds) >= 4096:
            _seconds.clear()
        head = _seconds[second] = iso_utc(second * 1000)[:-1]
    if len(_dues) >= 4096:
        _dues.clear()
    text = _dues[ms] = f"{head}.{milli:03d}Z" if milli else head + "Z"
    return text


_YEAR_9000 = 221_845_392_000_000


#: Fires of one job dropped for one reason in one claim that are named one by one; more
#: are said in one line (their ids at DEBUG).
NAMED_DROPS = 3


def log_dropped(log: logging.Logger, worker: str, job: str, fires: list[tuple[str, int]],
                status: str, reason: str) -> None:
    """Fires of ``job`` the claim did not run, for one reason: a warning when they missed
    their time or died, which needs a look; skipped or queued by the job's own policy or a
    pause is the normal way. A few are named each; more are counted in one line, with the
    first and last due times."""
    level = logging.WARNING if status in ("missed", "dead") else logging.INFO
    if len(fires) > NAMED_DROPS:
        dues = sorted(due for _, due in fires)
        why = "" if reason == status else f" ({reason})"
        log.log(level, "%s %d fires of %s, due %s to %s%s", status, len(fires), job,
                iso_utc(dues[0]), iso_utc(dues[-1]), why,
                extra={"fire": fires[0][0], "worker": worker})
    each = level if len(fires) <= NAMED_DROPS else logging.DEBUG
    for fid, _ in fires:
        log.log(each, "%s %s (%s)", status, fid, reason, extra={"fire": fid, "worker": worker})


def lost_record(claim: Claim, before: dict[str, Any]) -> HistoryRecord:
    """The history line of an attempt whose lease lapsed: its worker died, froze or lost
    Redis before the run's result was recorded; ``claim`` is the attempt after it."""
    worker = before.get("worker") or "?"
    token = before.get("token")
    return record(claim.fire_id, "lost", job=claim.job, scheduled=claim.due_ms,
                  reason=f"lease lost: worker {worker}", started=before.get("claimed_at"),
                  attempt=int(token) if token is not None else claim.token - 1, worker=worker)
