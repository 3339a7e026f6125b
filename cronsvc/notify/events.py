"""The event a channel delivers, and its JSON: the webhook schema, version 1.

A webhook receives one JSON object per event::

    {"version": 1, "id": "...", "event": "dead", "job": "nightly-backup",
     "fire": "nightly-backup@1795500000000", "attempt": 3, "status": "failed",
     "error": "exit 3", "output": "last lines of the output", "count": 1, "period_s": null,
     "scheduled_at": "2026-11-24T02:30:00Z", "at": "2026-11-24T02:31:05.120Z",
     "links": {"job": "http://127.0.0.1:8080/jobs/nightly-backup", ...},
     "title": "nightly-backup: failed for good (no attempts left)"}

``title`` is the one line a chat message or a mail subject shows. ``id`` is the same each
time one event is sent again: the receiver's idempotency key.
``count`` says how many events of the kind it stands for: 1, but for a folded repeat
(``period_s`` then says over how long) and for ``recovered`` (the failures it ends).

An outbox entry (:mod:`cronsvc.outbox.entries`) becomes the event it tells by
:func:`from_outbox`.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

from cronsvc.clock import iso_utc
from cronsvc.durations import spoken
from cronsvc.fires import parse_fire

VERSION = 1
#: The output tail a message carries at most.
OUTPUT_TAIL = 2000


@dataclass(frozen=True)
class Event:
    id: str
    event: str
    job: str | None
    at_ms: int
    fire: str | None = None
    attempt: int | None = None
    status: str | None = None
    error: str | None = None
    output: str | None = None
    scheduled_ms: int | None = None
    count: int = 1
    period_s: int | None = None
    links: dict[str, str] = field(default_factory=dict)

    def payload(self) -> dict[str, Any]:
        """The webhook body (see the module's doc)."""
        d = asdict(self)
        at, scheduled = d.pop("at_ms"), d.pop("scheduled_ms")
        if d["output"]:
            d["output"] = d["output"][-OUTPUT_TAIL:]
        return {"version": VERSION, **d, "title": self.title(), "at": iso_utc(at),
                "scheduled_at": iso_utc(scheduled) if scheduled is not None else None}

    def body(self) -> bytes:
        return json.dumps(self.payload(), separators=(",", ":")).encode()

    def title(self) -> str:
        """One line for chat and mail subjects."""
        who = self.job or "cronsvc"
        what = {"failed": "failed", "dead": "failed for good (no attempts left)",
                "missed": "missed its start", "skipped": "was skipped",
                "recovered": "recovered", "lease_lost": "lost its worker mid-run",
                "paused": "was paused", "no_worker": "no live worker",
                "no_planner": "no live planner", "queue_late": "the queue is late",
                "test": "test message"}.get(self.event, self.event)
        if self.event == "recovered" and self.job is None:
            what = "the fleet recovered"
        if self.event == "recovered" and self.count > 1:
            return f"{who}: recovered after {self.count} failures"
        if self.event == "paused":  # count: the fires that failed in a row, not the pauses
            fires = "fire" if self.count == 1 else "fires"
            return f"{who}: paused after {self.count} {fires} failed in a row"
        if self.period_s is not None:
            again = {"failed": "failing", "dead": "failing", "missed": "missing its start",
                     "skipped": "skipped", "lease_lost": "losing its worker"}.get(
                         self.event, self.event)
            times = "once" if self.count == 1 else f"{self.count} times"
            return f"{who}: {again} again, {times} in {spoken(self.period_s * 1000)}"
        again = f" ({self.count} times)" if self.count > 1 else ""
        return f"{who}: {what}{again}"

    def text(self) -> str:
        """The lines below the title: what, when, why, where to look."""
        lines = [f"event: {self.event}", f"at: {iso_utc(self.at_ms)}"]
        if self.fire:
            lines.append(f"fire: {self.fire}" + (f" (attempt {self.attempt})"
                                                 if self.attempt else ""))
        if self.scheduled_ms is not None:
            lines.append(f"scheduled: {iso_utc(self.scheduled_ms)}")
        if self.error:
            lines.append(f"error: {self.error}")
        if self.output:
            lines += ["output:", self.output[-OUTPUT_TAIL:]]
        lines += [f"{name}: {url}" for name, url in self.links.items()]
        return "\n".join(lines)


def event_id(entry: dict[str, Any]) -> str:
    """The id of an outbox entry's event: the same however often it is read."""
    if entry.get("id"):  # a fleet condition's, given by the notifier
        return str(entry["id"])
    kind, fire = entry.get("event", "?"), entry.get("fire") or entry.get("job") or "?"
    if kind == "paused":
        return f"paused:{fire}:{entry.get('count', 0)}"
    return f"{kind}:{fire}:{entry.get('attempt', 0)}"


def from_outbox(entry: dict[str, Any], now_ms: int, links: dict[str, str]) -> Event:
    """The event of one outbox entry (``at`` defaults to ``now_ms``)."""
    fire = entry.get("fire")
    error = entry.get("reason")
    if entry.get("exit_code") is not None and not error:
        error = f"exit {entry['exit_code']}"
    return Event(id=event_id(entry), event=str(entry.get("event", "?")), job=entry.get("job"),
                 at_ms=int(entry.get("at") or now_ms), fire=fire,
                 attempt=entry.get("attempt"), status=entry.get("status"), error=error,
                 output=entry.get("output"),
                 scheduled_ms=_due(fire),
                 count=int(entry.get("count") or 1), links=links)


def _due(fire: str | None) -> int | None:
    try:
        return parse_fire(fire)[1] if fire else None
    except ValueError:
        return None


def from_json(raw: str | dict[str, Any]) -> Event:
    """An event stored with its message (every field, as ``asdict`` gives them)."""
    d = json.loads(raw) if isinstance(raw, str) else raw
    return Event(**{k: v for k, v in d.items() if k in Event.__dataclass_fields__})


def sample(now_ms: int) -> Event:
    """What ``cronsvc notify test`` sends."""
    return Event(id=f"test-{now_ms}", event="test", job="cronsvc-test", at_ms=now_ms,
                 fire=f"cronsvc-test@{now_ms}", attempt=1, status="failed",
                 error="a sample failure: this channel works",
                 output="the last lines of the run's output go here", scheduled_ms=now_ms)
