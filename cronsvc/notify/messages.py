"""The notifications: the events of the outbox turned into messages, one per channel.

Every outbox entry but a chain is an event. Each is filtered by what its job wants (its
``notify`` channels and ``notify_on`` events; ``paused`` is told to every channel of the
job), folded (:mod:`cronsvc.notify.fold`) and turned into one message per channel of the
job. ``lua/notify-route-6+.lua`` queues the messages, writes the episodes and takes the
routed entries out of the outbox in one step, checking the lease: an entry is either still
in the outbox or its messages exist. A message id is the event id and the channel, and a
message queued or sent before is not queued again: two notifiers, or one that died between
the two steps on a sharded fleet, send nothing twice.

The fleet watch of the notifier (:meth:`cronsvc.notify.notifier.Notifier.watch_fleet`)
queues its messages here too.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import asdict, replace
from typing import TypeAlias

import redis

from cronsvc.config.models import Config
from cronsvc.errors import NotLeader
from cronsvc.keys import Keys, all_shards
from cronsvc.notify.events import from_outbox
from cronsvc.notify.fold import Episodes, Told
from cronsvc.outbox.entries import CHAIN, PAUSED, Entry
from cronsvc.store.replies import text
from cronsvc.store.scripts import Scripts

log = logging.getLogger("cronsvc.notify")

#: ``(channel, message id, JSON)``: one message to queue.
Message: TypeAlias = tuple[str, str, str]


class Messages:
    """The notifications of one notifier: a consumer of the outbox router, and the one
    that takes each shard's batch out (:class:`cronsvc.outbox.router.Closer`). The router
    calls :meth:`begin` once a pass, :meth:`take` per entry and :meth:`close` per shard."""

    def __init__(self, client: redis.Redis, scripts: Scripts, config: Callable[[], Config],
                 sender: str, leader: threading.Event) -> None:
        self.client = client
        self.scripts = scripts
        self.config = config
        self.sender = sender  # the notifier id the route script checks the lease against
        self.leader = leader  # cleared when the route script says the lease is gone
        # The pass under way: its time, the home shard, the episodes, what a shard tells.
        self._now = 0
        self._home = Keys()
        self._episodes = Episodes({}, 0)
        self._told: list[Told] = []

    @property
    def home(self) -> Keys:
        """The shard that holds the lease, the episodes and the messages."""
        c = self.config()
        return all_shards(c.redis.shards, c.redis.prefix)[0]

    # -- a consumer of the outbox router -------------------------------------------
    def needed(self, config: Config) -> bool:
        """The file declares channels (the fleet's are among them)."""
        return bool(config.notify)

    def takes(self, kind: str) -> bool:
        return kind != CHAIN  # a chain is work for cronsvc.outbox.chains, told to no one

    def begin(self, now_ms: int) -> None:
        """A pass starts: the episodes as Redis holds them, and the summaries of the fold
        windows that ended, queued first."""
        self._now = now_ms
        self._home = self.home
        self._episodes = self.episodes(self._home)
        self._told = []
        summaries = self._episodes.due(now_ms)
        if summaries:
            self.queue(self._home, 0, self._episodes, self.render(summaries, now_ms))

    def take(self, entry: Entry, shard: Keys) -> None:
        """One event of ``shard``'s outbox, oldest first: told now, folded, or not wanted."""
        if not self.wanted(entry):
            return
        told = self._episodes.seen(entry, self._now)
        if told is not None:
            self._told.append(told)

    def close(self, shard: Keys, routed: int, aside: Sequence[str]) -> None:
        """Queue what ``shard``'s entries tell, keep the lines of ``aside`` (its entries
        that are no event) and take the ``routed`` oldest entries out of its outbox."""
        messages = self.render(self._told, self._now)
        self._told = []
        if shard == self._home:
            self.queue(self._home, routed, self._episodes, messages, aside)
        else:
            # The route script holds the home shard's keys only (one slot on a cluster):
            # another shard's entries leave its outbox once their messages are queued.
            self.queue(self._home, 0, self._episodes, messages, aside)
            self.client.ltrim(shard.outbox, 0, -routed - 1)

    # -- shared with the fleet watch ----------------------------------------------
    def episodes(self, home: Keys) -> Episodes:
        """The episodes as Redis holds them, folded by the file's window."""
        raw = self.client.hgetall(home.notify_episodes)
        return Episodes({text(k): text(v) for k, v in raw.items()},
                        int(self.config().notifier.fold * 1000))

    def queue(self, home: Keys, routed: int, episodes: Episodes, messages: list[Message],
              aside: Sequence[str] = ()) -> None:
        """Queue ``messages``, write the episodes' changes, keep ``aside`` and take
        ``routed`` entries out of the home outbox: one call of the route script."""
        changes = episodes.changes()
        episodes.changed.clear()
        if not routed and not changes and not messages and not aside:
            return
        try:
            self.scripts.notify_route(home, self.sender, routed, changes, messages, aside)
        except NotLeader:
            self.leader.clear()

    def wanted(self, entry: Entry) -> bool:
        """The job of the event is in this file, has channels and wants this event."""
        kind, job = entry.get("event"), entry.get("job")
        spec = self.config().jobs.get(job) if isinstance(job, str) else None
        if spec is None:
            if job is not None:
                log.warning("notify: event %s of job %s, which this file does not have: "
                            "not told", kind, job)
            return False
        if kind == PAUSED:
            return True
        return bool(spec.notify) and kind in spec.notify_on

    def render(self, told: list[Told], now: int) -> list[Message]:
        """The message to each channel of what ``told`` tells."""
        config = self.config()
        out = []
        for t in told:
            entry = t.entry
            job = entry.get("job")
            event = from_outbox(entry, now, self.links(job, entry.get("fire")))
            if t.summary_id is not None:
                event = replace(event, id=t.summary_id, count=t.count, period_s=t.period_s,
                                 at_ms=now)
            elif t.count != 1:
                event = replace(event, count=t.count)
            if job is None:
                channels = config.notifier.fleet
            else:
                spec = config.jobs.get(job)
                channels = spec.notify if spec else ()
            for channel in channels:
                if channel in config.notify:
                    body = json.dumps({"event": asdict(event), "channel": channel,
                                       "first_ms": now, "attempts": 0, "error": None},
                                      separators=(",", ":"))
                    out.append((channel, f"{event.id}/{channel}", body))
        return out

    def links(self, job: str | None, fire: str | None) -> dict[str, str]:
        """The dashboard's pages of the job and the fire, when the file names its URL."""
        base = self.config().notifier.url
        if not base:
            return {}
        base = base.rstrip("/")
        out = {}
        if job:
            out["job"] = f"{base}/jobs/{job}"
        if fire:
            out["fire"] = f"{base}/fires/{fire}"
        return out
