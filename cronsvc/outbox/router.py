"""The outbox router: each shard's outbox read oldest first, each entry handed to the
consumers of its event.

The consumers, each in a module of its own:

- notifications (:mod:`cronsvc.notify.messages`): every event but ``chain``, told to the
  channels of its job;
- chains (:mod:`cronsvc.outbox.chains`): ``chain``, the ``on_success``/``on_failure``
  jobs queued;
- auto-pause (:mod:`cronsvc.outbox.autopause`): ``paused``, the job paused on every shard.

Where it runs: in the notifier (:mod:`cronsvc.notify.notifier`), so in every planner and
in ``cronsvc notifier``, by the one holding the notifier lease. Nothing else reads the
outbox: with no planner and no ``cronsvc notifier`` running, nobody is told, no chain is
queued and an automatic pause stays on the shard that saw the failures.

A pass takes up to :data:`ROUTE_BATCH` entries per shard. An entry that is no event (one
written by hand: :func:`cronsvc.outbox.entries.parse_entry` says why) is set aside, never
handed on. Then the closer (the notifications) takes the batch out of the outbox in the
same step that queues its messages. A pass that stops before that hands the same entries
on again next time, and the consumers allow for it: a chain fire is queued once ever, a
second pause keeps its start (only its audit line is written again), a message queued
before is not queued again.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Protocol

import redis

from cronsvc.config.models import Config
from cronsvc.keys import Keys
from cronsvc.malformed import SetAside
from cronsvc.outbox.entries import Entry, parse_entry
from cronsvc.store.replies import text
from cronsvc.store.scripts import Scripts

log = logging.getLogger("cronsvc.outbox")

#: Outbox entries routed per shard and pass at most.
ROUTE_BATCH = 200


class FleetConsumer:
    """A consumer that acts on the fleet itself, with its Redis, its scripts and the job
    file in force; it takes the entries of one event (:attr:`event`)."""

    event: str

    def __init__(self, client: redis.Redis, scripts: Scripts,
                 config: Callable[[], Config]) -> None:
        self.client = client
        self.scripts = scripts
        self.config = config

    def takes(self, kind: str) -> bool:
        return kind == self.event


class Consumer(Protocol):
    """One use of the outbox's entries."""

    def needed(self, config: Config) -> bool:
        """The job file gives this consumer anything to do."""
        ...

    def takes(self, kind: str) -> bool:
        """Entries whose event is ``kind`` are for this consumer."""
        ...

    def take(self, entry: Entry, shard: Keys) -> None:
        """Act on one entry of ``shard``'s outbox, oldest first."""
        ...


class Closer(Protocol):
    """The consumer whose writes leave the outbox in one step with the entries they came
    from: it takes each shard's batch out."""

    def begin(self, now_ms: int) -> None:
        """A pass starts, at ``now_ms`` (the time entries are set aside at, too)."""
        ...

    def close(self, shard: Keys, routed: int, aside: Sequence[str]) -> None:
        """Take the ``routed`` oldest entries out of ``shard``'s outbox and keep the lines
        of ``aside`` (its entries that are no event) in the list of entries set aside."""
        ...


class Router:
    """Hands each outbox entry to the consumers that take its event, in their order."""

    def __init__(self, client: redis.Redis, shards: Callable[[], list[Keys]],
                 consumers: Sequence[Consumer], closer: Closer) -> None:
        self.client = client
        self.shards = shards
        self.consumers = consumers
        self.closer = closer

    def needed(self, config: Config) -> bool:
        """Any consumer has anything to do with this job file."""
        return any(consumer.needed(config) for consumer in self.consumers)

    def route(self, now_ms: int) -> None:
        """One pass over the outbox of every shard."""
        self.closer.begin(now_ms)
        for shard in self.shards():
            self._route_shard(shard, now_ms)

    def _route_shard(self, shard: Keys, now_ms: int) -> None:
        raw = self.client.lrange(shard.outbox, -ROUTE_BATCH, -1)
        if not raw:
            return
        aside: list[str] = []
        for item in reversed(raw):  # oldest first
            try:
                entry = parse_entry(text(item))
            except ValueError as exc:  # written by hand: kept, never routed
                found = SetAside(shard.outbox, text(item), str(exc), now_ms)
                log.warning("set aside %s (`cronsvc malformed` lists it)", found)
                aside.append(found.line())
                continue
            for consumer in self.consumers:
                if consumer.takes(entry["event"]):
                    consumer.take(entry, shard)
        self.closer.close(shard, len(raw), aside)
