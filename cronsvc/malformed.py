"""Entries read back from Redis that are not what their key holds.

Redis is input like any other: a hand, a bug or another program may write a queue member
that is not a fire id, a schedule line that is not one, a history line that is not JSON.
No loop stops and no process ends for it. Who keeps a key in order (the claim script the
queue and working set, the planner the runtime schedules, the notifier the outbox) *sets
aside* what it cannot read: takes it out, once, and keeps it in the shard's list of them
(:attr:`cronsvc.keys.Keys.malformed`), which ``cronsvc status`` counts and ``cronsvc
malformed`` lists. A listing only skips what it cannot read, and names it (:func:`named`).

One entry of the list, as ``lua/includes/malformed.lua`` writes it too::

    {"key": "cron:queue", "member": "marker@abc", "why": "not a fire id", "at": 1795572000000}

``member`` is the raw member (a zset's, a list entry) or field (a hash's, whose value is
kept in ``value`` too).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

#: Entries kept per shard (the newest; the list is trimmed as it grows).
KEPT = 1000
#: The most of a member or value a message shows.
SHOWN = 80


@dataclass(frozen=True)
class SetAside:
    """One entry set aside: the key it was in, its member (or field), why, when (ms)."""

    key: str
    member: str
    why: str
    at_ms: int
    value: str | None = None  # a hash field's value, a list entry's whole text

    def line(self) -> str:
        """The entry as stored in the list."""
        entry: dict[str, Any] = {"key": self.key, "member": self.member, "why": self.why,
                                 "at": self.at_ms}
        if self.value is not None:
            entry["value"] = self.value
        return json.dumps(entry, separators=(",", ":"))

    def __str__(self) -> str:
        return named(self.key, self.member, self.why)


def parse(raw: Any) -> SetAside:
    """An entry of the list; one that is not (written by hand too) is shown as it is."""
    text = raw.decode(errors="replace") if isinstance(raw, bytes) else str(raw)
    try:
        e = json.loads(text)
        return SetAside(str(e["key"]), str(e["member"]), str(e["why"]), int(e["at"]),
                        None if e.get("value") is None else str(e["value"]))
    except (ValueError, TypeError, KeyError, AttributeError):
        return SetAside("?", text, "not an entry of this list", 0)


def shown(member: str) -> str:
    """A member as a message may show it: quoted, escaped, cut."""
    cut = member if len(member) <= SHOWN else member[:SHOWN] + "..."
    return repr(cut) + ("" if len(member) <= SHOWN else f" ({len(member)} characters)")


def named(key: str, member: str, why: str) -> str:
    """What cannot be read, and where: ``cron:schedules 'ghost:2': not a stored schedule``."""
    return f"{key} {shown(member)}: {why}"
