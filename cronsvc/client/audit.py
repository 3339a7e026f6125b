"""The audit log: every change an operator makes to the fleet (pause, resume, trigger,
at, cancel, retry, purge, schedule changes), who made it, when, and the note given.

One list on the first shard (``Keys.audit``), newest first and capped. The CLI, the
HTTP API and the pages all write it through the Client (each change ends with
:meth:`cronsvc.client.core.Core.audited`), so one place shows them all.
"""

from __future__ import annotations

import getpass
import os
from dataclasses import dataclass
from typing import Protocol

import redis

from cronsvc.audit import AUDIT_CAP, Action, parse
from cronsvc.errors import BadArgument
from cronsvc.keys import Keys
from cronsvc.store.replies import text


def default_actor(origin: str = "client") -> str:
    """Who acts when nobody says: the OS user of the process, as ``<origin>:<user>``;
    ``client:<user>`` for the Python Client, ``cli:<user>`` for the commands (the web
    acts as ``web:<token name>``). One name for the audit log and the schedule records."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):  # no name for this uid (a container)
        user = f"uid-{os.getuid()}"
    return f"{origin}:{user}"


@dataclass(frozen=True)
class AuditPage:
    """Entries newest first; pass ``cursor`` back for older ones (None: no more)."""

    actions: list[Action]
    cursor: int | None


class AuditContext(Protocol):
    """What the audit log takes of the client's core (:class:`cronsvc.client.core.Core`)."""

    redis: redis.Redis

    def all_shards(self) -> list[Keys]: ...


class AuditLog:
    """The audit log as :class:`cronsvc.Client` reads it."""

    def __init__(self, core: AuditContext) -> None:
        self.core = core

    def audit(self, *, limit: int = 50, cursor: int | None = None) -> AuditPage:
        """A page of the audit log, newest first."""
        # Checked here: Redis refuses an index past 64 bits, which would read as an outage.
        if not 1 <= limit <= AUDIT_CAP:
            raise BadArgument(f"limit {limit}: 1 to {AUDIT_CAP}")
        if cursor is not None and not 0 <= cursor <= AUDIT_CAP:
            raise BadArgument(f"cursor {cursor}: not one a page gave (0 to {AUDIT_CAP})")
        start = cursor or 0
        raw = self.core.redis.lrange(self.core.all_shards()[0].audit, start, start + limit)
        actions = [parse(text(r)) for r in raw[:limit]]
        return AuditPage(actions, start + limit if len(raw) > limit else None)

