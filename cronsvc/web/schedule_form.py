"""The dashboard's form of a runtime schedule: the fields of
:meth:`cronsvc.Client.upsert_schedule` made of what it posts, the form filled in from a
schedule, and which field an error names (the page marks it and says why beside it).

The form sets the whole definition but the calendar, which the page cannot write: a change
keeps the one the schedule has (:func:`cronsvc.schedule.calendars.rule_fields`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from cronsvc.clock import iso_utc
from cronsvc.durations import format_duration
from cronsvc.errors import BadArgument
from cronsvc.schedule.calendars import rule_fields
from cronsvc.schedule.runtime import RuntimeSchedule

#: The fields the form has, in its order; the first three are always shown.
FIELDS = ("cron", "every", "timezone", "payload", "anchor", "start", "end", "max_runs",
          "catch_up", "starting_deadline", "jitter", "overlap")
#: Fields written as text and handed on as they are (the schedule checks them).
_TEXT = ("cron", "every", "anchor", "start", "end", "starting_deadline", "jitter")


def values(form: Mapping[str, str]) -> dict[str, str]:
    """The form as typed, to show it again beside an error."""
    return {f: form.get(f, "") for f in ("id", "paused", *FIELDS)}


def fields(form: Mapping[str, str], sid: str) -> dict[str, Any]:
    """The upsert's fields of a posted form (empty text: not set); BadArgument naming
    ``payload`` if it is not JSON."""
    text = {f: form.get(f, "").strip() for f in FIELDS}
    out: dict[str, Any] = {f: text[f] for f in _TEXT if text[f]}
    out["timezone"] = text["timezone"] or "UTC"
    if text["max_runs"]:  # a number, or the text the schedule says is none
        out["max_runs"] = int(text["max_runs"]) if text["max_runs"].isdigit() \
            else text["max_runs"]
    for choice in ("catch_up", "overlap"):
        out[choice] = text[choice] or None  # empty: the job's
    out["payload"] = payload_of(form.get("payload", ""), f"schedule {sid!r}: payload")
    out["paused"] = form.get("paused") == "true"
    return out


def payload_of(text: str, where: str) -> Any:
    """The JSON value of ``text`` (None when empty); BadArgument saying ``where`` and where
    in the text it stops being JSON."""
    if not text.strip():
        return None
    try:
        return json.loads(text)
    except ValueError as exc:
        raise BadArgument(f"{where}: not JSON: {exc}") from None


def filled(s: RuntimeSchedule) -> dict[str, str]:
    """The form of ``s``, as a change of it starts."""
    def duration(ms: int | None) -> str:
        return format_duration(ms) if ms else ""

    def time(ms: int | None) -> str:
        return iso_utc(ms) if ms is not None else ""

    return {"id": s.id, "cron": s.cron or "", "every": duration(s.every_ms),
            "timezone": s.timezone,
            "payload": "" if s.payload is None else json.dumps(s.payload, indent=1),
            "anchor": time(s.anchor_ms), "start": time(s.start_ms), "end": time(s.end_ms),
            "max_runs": str(s.max_runs or ""), "catch_up": s.catch_up or "",
            "starting_deadline": duration(s.starting_deadline_ms),
            "jitter": duration(round(s.jitter * 1000)), "overlap": s.overlap or ""}


def kept(s: RuntimeSchedule) -> dict[str, Any]:
    """What a change from the form keeps of ``s``: its calendar."""
    return {k: v for k, v in rule_fields(s.calendar).items() if v}


_FIELD = re.compile(r"schedule (?:id\b|'[^']*'|\"[^\"]*\")(?::\s*([a-z_]+))?")


def field_of(message: str) -> str | None:
    """The form field an error of the schedule names: ``schedule 'x': cron: ...`` is the
    cron field's; None when it names none of the form's."""
    if message.startswith("schedule id "):
        return "id"
    m = _FIELD.match(message)
    found = m.group(1) if m else None
    if found == "job":
        return None  # the page's job, not a field typed in
    return found if found in FIELDS else None
