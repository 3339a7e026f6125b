"""Noise control: which events are told at once, and which are folded into one message.

Per job and kind of event there is an *episode*. The first event is told at once and
opens a window of ``fold`` seconds; repeats inside it are only counted, and told as one
message when the window ends ("failed again, 5 times in 10 min"), which opens the next
window. ``recovered`` ends a job's failure episodes (failed, dead, lease_lost): it is told
only when one was open, with the fires failed in a row it ends, so a job nobody heard fail never
"recovers". Fleet conditions (no live worker, ...) are told once when they begin, and
with ``recovered`` when they end.

Pure: the notifier reads the episodes from Redis (``Keys.notify_episodes``), applies the
events of one pass here, and writes back :attr:`Episodes.changed` in the same script call
that queues the messages.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Any

#: The kinds of event a success ends.
FAILURES = frozenset({"failed", "dead", "lease_lost"})
#: Told once per episode, never folded: a fleet condition, and an automatic pause.
FLEET = "~fleet"


def episode_key(job: str | None, kind: str) -> str:
    return f"{job or FLEET}|{kind}"


@dataclass
class Episode:
    start_ms: int  # when the current window began
    folded: int = 0  # repeats in this window, not told yet
    total: int = 1  # events of the whole episode
    last: dict[str, Any] | None = None  # the newest repeat: what the summary shows

    def as_json(self) -> str:
        return json.dumps(asdict(self), separators=(",", ":"))

    @classmethod
    def from_json(cls, raw: str) -> Episode | None:
        try:
            d = json.loads(raw)
            return cls(int(d["start_ms"]), int(d.get("folded", 0)), int(d.get("total", 1)),
                       d.get("last"))
        except (ValueError, TypeError, KeyError):
            return None


@dataclass(frozen=True)
class Told:
    """One message to send: the outbox entry it tells, how many events it stands for,
    and, for a folded repeat, the window (seconds) and the id of its summary."""

    entry: dict[str, Any]
    count: int = 1
    period_s: int | None = None
    summary_id: str | None = None


class Episodes:
    """The episodes of every job, changed by the events of one pass."""

    def __init__(self, raw: dict[str, str], window_ms: int) -> None:
        self.window_ms = window_ms
        self.items: dict[str, Episode] = {}
        for key, value in raw.items():
            episode = Episode.from_json(value)
            if episode is not None:
                self.items[key] = episode
        self.changed: set[str] = set()

    def changes(self) -> list[tuple[str, str]]:
        """``(field, JSON or '')`` for the route script: '' deletes an episode."""
        return [(k, self.items[k].as_json() if k in self.items else "")
                for k in sorted(self.changed)]

    def seen(self, entry: dict[str, Any], now_ms: int) -> Told | None:
        """An event of the outbox: what to tell now, or None (folded, or nothing to end)."""
        kind, job = str(entry.get("event")), entry.get("job")
        if kind == "paused":
            return Told(entry)
        if kind == "recovered":
            return self._ended(job, entry)
        key = episode_key(job, kind)
        episode = self.items.get(key)
        self.changed.add(key)
        if episode is None or now_ms >= episode.start_ms + self.window_ms:
            self.items[key] = Episode(now_ms, 0, (episode.total if episode else 0) + 1)
            return Told(entry)
        episode.folded += 1
        episode.total += 1
        episode.last = entry
        return None

    def _ended(self, job: str | None, entry: dict[str, Any]) -> Told | None:
        keys = [k for k in self.items
                if k.split("|", 1)[0] == (job or FLEET) and k.split("|", 1)[1] in FAILURES]
        if not keys:
            return None
        for k in keys:
            del self.items[k]
            self.changed.add(k)
        # The count is the script's: fires failed in a row (0 when only attempts failed).
        return Told(entry, count=max(int(entry.get("count") or 0), 1))

    def due(self, now_ms: int) -> list[Told]:
        """Summaries of the windows that ended with repeats; each opens the next window.
        An episode of missed or skipped fires quiet for a window is over."""
        out = []
        for key, episode in list(self.items.items()):
            if now_ms < episode.start_ms + self.window_ms or key.startswith(FLEET + "|"):
                continue
            kind = key.split("|", 1)[1]
            if episode.folded and episode.last is not None:
                out.append(Told(episode.last, episode.folded, self.window_ms // 1000,
                                f"{kind}:{key.split('|', 1)[0]}:{episode.start_ms}:folded"))
                self.items[key] = Episode(now_ms, 0, episode.total)
                self.changed.add(key)
            elif kind not in FAILURES:
                del self.items[key]
                self.changed.add(key)
        return out

    def condition(self, kind: str, active: bool, now_ms: int,
                  detail: str) -> Told | None:
        """A fleet condition as it is now: told when it begins, and when it ends."""
        key = episode_key(None, kind)
        if active and key not in self.items:
            self.items[key] = Episode(now_ms)
            self.changed.add(key)
            return Told({"event": kind, "at": now_ms, "reason": detail,
                         "id": f"{kind}:{now_ms}"})
        if not active and key in self.items:
            began = self.items.pop(key).start_ms
            self.changed.add(key)
            return Told({"event": "recovered", "at": now_ms, "reason": detail,
                         "id": f"recovered:{kind}:{began}", "status": kind})
        return None
