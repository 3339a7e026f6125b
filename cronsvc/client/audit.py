"""The audit log: every change an operator makes to the fleet (pause, resume, trigger,
at, cancel, retry, purge, schedule changes), who made it, when, and the note given.

One list on the first shard (``Keys.audit``), newest first and capped. The CLI, the
HTTP API and the pages all write it through the Client, so one place shows them all.
"""

from __future__ import annotations

import getpass
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from cronsvc.audit import AUDIT_CAP, Action, parse, write
from cronsvc.errors import BadArgument
from cronsvc.store.replies import text

if TYPE_CHECKING:
    import redis

    from cronsvc.keys import Keys


def default_actor() -> str:
    """Who acts when nobody says: the OS user of the process, as ``cli:<user>``."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):  # no name for this uid (a container)
        user = f"uid-{os.getuid()}"
    return f"cli:{user}"


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
        write(self.redis, self._shards()[0].audit,
              Action(self.server_ms(), self.actor, action, target, note or None,
                     {k: v for k, v in detail.items() if v is not None}))

    def audit(self, *, limit: int = 50, cursor: int | None = None) -> AuditPage:
        """A page of the audit log, newest first."""
        # Checked here: Redis refuses an index past 64 bits, which would read as an outage.
        if not 1 <= limit <= AUDIT_CAP:
            raise BadArgument(f"limit {limit}: 1 to {AUDIT_CAP}")
        if cursor is not None and not 0 <= cursor <= AUDIT_CAP:
            raise BadArgument(f"cursor {cursor}: not one a page gave (0 to {AUDIT_CAP})")
        start = cursor or 0
        raw = self.redis.lrange(self._shards()[0].audit, start, start + limit)
        actions = [parse(text(r)) for r in raw[:limit]]
        return AuditPage(actions, start + limit if len(raw) > limit else None)

