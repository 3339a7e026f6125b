"""What a run leaves behind: its history record and its console line."""

from __future__ import annotations

import logging
from typing import Any

from .clock import iso_utc
from .executor import Outcome
from .fires import parse_fire
from .scripts import Claim

# Claim drops a fire for one of these reasons; anything else is a skip by policy.
DROP_STATUS = {"missed": "missed", "dead": "dead"}


def history_record(
    claim: Claim, outcome: Outcome, worker: str, offset_ms: int, *, status: str | None = None
) -> dict[str, Any]:
    """The history line of one finished attempt, times on the server's clock."""
    return {
        "fire": claim.fire_id,
        "job": claim.job,
        "status": status or outcome.status,
        "reason": outcome.error,
        "scheduled": claim.due_ms,
        "started": outcome.started_ms + offset_ms,
        "duration_ms": outcome.duration_ms,
        "attempt": claim.token,
        "worker": worker,
        "exit_code": outcome.exit_code,
        "output": outcome.output or None,
    }


def drop_record(fid: str, reason: str, worker: str) -> dict[str, Any]:
    """The history line of a fire the claim script decided not to run."""
    job, due_ms, _ = parse_fire(fid)
    return {
        "fire": fid, "job": job, "status": DROP_STATUS.get(reason, "skipped"), "reason": reason,
        "scheduled": due_ms, "started": None, "duration_ms": None, "attempt": None,
        "worker": worker, "exit_code": None, "output": None,
    }


def log_outcome(
    log: logging.Logger, worker: str, claim: Claim, outcome: Outcome, lag_ms: int, note: str = ""
) -> None:
    level = logging.INFO if outcome.status == "ok" else logging.WARNING
    extra = f" exit={outcome.exit_code}" if outcome.exit_code not in (None, 0) else ""
    error = f" error={outcome.error!r}" if outcome.error else ""
    log.log(
        level,
        "%s %s attempt=%d scheduled=%s lag=%dms took=%dms%s%s%s",
        outcome.status, claim.fire_id, claim.token, iso_utc(claim.due_ms), lag_ms,
        outcome.duration_ms, extra, error, f" ({note})" if note else "",
        extra={"job": claim.job, "fire": claim.fire_id, "attempt": claim.token, "worker": worker},
    )


def log_dropped(log: logging.Logger, worker: str, fid: str, status: str, reason: str) -> None:
    log.warning("%s %s (%s)", status, fid, reason, extra={"fire": fid, "worker": worker})
