"""An audit entry and its JSON: one home for the wire format of ``Keys.audit``.

Every change an operator makes (pause, resume, trigger, at, cancel, retry, purge,
schedule changes), and the pauses cronsvc makes itself (actor ``auto``), is one entry::

    {"at_ms": 1795500000000, "actor": "cli:alice", "action": "pause",
     "target": "nightly-backup", "note": "disk full", "detail": {}}

in one list on the first shard, newest first and capped at :data:`AUDIT_CAP`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

#: Entries kept: the oldest go first.
AUDIT_CAP = 10_000


@dataclass(frozen=True)
class Action:
    """One audit entry."""

    at_ms: int
    actor: str
    action: str  # pause, resume, trigger, at, cancel, retry, purge, schedule-set, ...
    target: str  # a job, a fire id, a schedule id, or a summary ("120 schedules")
    note: str | None = None
    detail: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {"at_ms": self.at_ms, "actor": self.actor, "action": self.action,
                "target": self.target, "note": self.note, "detail": self.detail}


def write(client: Any, key: str, entry: Action) -> None:
    """Add ``entry`` to the audit list ``key`` (a redis client, one round trip)."""
    pipe = client.pipeline(transaction=False)
    pipe.lpush(key, json.dumps(entry.as_dict(), separators=(",", ":")))
    pipe.ltrim(key, 0, AUDIT_CAP - 1)
    pipe.execute()


def parse(raw: str) -> Action:
    """An entry as :func:`write` stored it."""
    d = json.loads(raw)
    return Action(int(d.get("at_ms") or 0), str(d.get("actor") or "?"),
                  str(d.get("action") or "?"), str(d.get("target") or ""), d.get("note"),
                  dict(d.get("detail") or {}))
