"""The audit log: every change an operator makes to the fleet (pause, resume, trigger,
at, cancel, retry, purge, schedule changes), who made it, when, and the note given.

One list on the first shard (``Keys.audit``), newest first and capped. The CLI, the
HTTP API and the pages all write it through the Client, so one place shows them all.
"""

from __future__ import annotations

import getpass
import json
import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from cronsvc.errors import BadArgument
from cronsvc.store.replies import text

if TYPE_CHECKING:
    import redis

    from cronsvc.keys import Keys

#: Entries kept: the oldest go first.
AUDIT_CAP = 10_000


def default_actor() -> str:
    """Who acts when nobody says: the OS user of the process, as ``cli:<user>``."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):  # no name for this uid (a container)
        user = f"uid-{os.getuid()}"
    return f"cli:{user}"


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


@dataclass(frozen=True)
class AuditPage:
    """Entries newest first; pass ``cursor`` back for older ones (None: no more)."""

    actions: list[Action]
    cursor: int | None


class AuditLog:
    """The audit half of :class:`cronsvc.Client`."""

    redis: redis.Redis
    actor: str

    if TYPE_CHECKING:  # provided by FleetReader, beside this class in Client
        def server_ms(self) -> int: ...

        def _shards(self) -> list[Keys]: ...

    def audited(self, action: str, target: str, note: str | None = None,
                **detail: Any) -> None:
        """Write one entry for an action that just took effect."""
        entry = Action(self.server_ms(), self.actor, action, target, note or None,
                       {k: v for k, v in detail.items() if v is not None})
        key = self._shards()[0].audit
        pipe = self.redis.pipeline(transaction=False)
        pipe.lpush(key, json.dumps(entry.as_dict(), separators=(",", ":")))
        pipe.ltrim(key, 0, AUDIT_CAP - 1)
        pipe.execute()

    def audit(self, *, limit: int = 50, cursor: int | None = None) -> AuditPage:
        """A page of the audit log, newest first."""
        if limit < 1 or (cursor is not None and cursor < 0):
            raise BadArgument(f"limit {limit} / cursor {cursor}: limit at least 1, cursor "
                              "one a page gave")
        start = cursor or 0
        raw = self.redis.lrange(self._shards()[0].audit, start, start + limit)
        actions = [_action(text(r)) for r in raw[:limit]]
        return AuditPage(actions, start + limit if len(raw) > limit else None)


def _action(raw: str) -> Action:
    d = json.loads(raw)
    return Action(int(d.get("at_ms") or 0), str(d.get("actor") or "?"),
                  str(d.get("action") or "?"), str(d.get("target") or ""), d.get("note"),
                  dict(d.get("detail") or {}))
