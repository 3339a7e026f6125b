"""An outbox entry as the scripts push it (``lua/includes/outbox.lua``): its one Python home.

One JSON object with ``event``, ``job``, ``fire``, ``attempt``, ``at`` (ms), ``status``,
``reason``, ``exit_code``, ``output``, ``count`` and ``next``, each left out when it has no
value. ``event`` is ``chain`` for the jobs the end of a fire triggers (``next``: their
names, comma separated), ``paused`` for a job paused after failures, and otherwise the kind
of event people are told about (``failed``, ``dead``, ``recovered``...).
"""

from __future__ import annotations

import json
from typing import Any, TypeAlias

from cronsvc.fires import is_fire_id

#: One entry, read: every field as the JSON has it.
Entry: TypeAlias = dict[str, Any]

#: The event of an entry naming the jobs the end of a fire triggers.
CHAIN = "chain"
#: The event of an entry saying a job was paused after fires failed in a row.
PAUSED = "paused"

#: The type of each field of an outbox entry (all but ``event`` may be left out).
FIELD_TYPES: dict[str, type] = {
    "event": str, "job": str, "fire": str, "attempt": int, "at": int, "status": str,
    "reason": str, "exit_code": int, "output": str, "count": int, "next": str}


def parse_entry(raw: str) -> Entry:
    """An outbox entry as the scripts push it; ValueError saying why one is not (an entry
    written by hand: it is set aside, never routed)."""
    try:
        entry = json.loads(raw)
    except ValueError:
        raise ValueError("not JSON") from None
    if not isinstance(entry, dict):
        raise ValueError(f"a JSON {type(entry).__name__}, not an object")
    if not isinstance(entry.get("event"), str):
        raise ValueError("no event")
    for name, kind in FIELD_TYPES.items():
        value = entry.get(name)
        if value is not None and (not isinstance(value, kind) or isinstance(value, bool)):
            raise ValueError(f"its {name} is {json.dumps(value)[:40]}, not "
                             f"{'a string' if kind is str else 'a whole number'}")
    if entry.get("fire") is not None and not is_fire_id(entry["fire"]):
        raise ValueError("its fire is not a fire id")
    return entry
