"""Auto-pause across shards: a job paused after failures is paused on every shard.

The script that records a fire's failure for good pauses the job, once it failed
``pause_after_failures`` fires in a row, on the shard that saw them, and pushes a
``paused`` entry onto that shard's outbox in the same call (``lua/includes/outbox.lua``:
``fire_failed``). A job's fires may be on any shard, so this consumer pauses it on the
others (``lua/pause-4.lua``) and writes the audit line, actor ``auto``. Read twice, an
entry pauses nothing more (a pause keeps its ``since``) and adds a second audit line.

Nothing but the outbox router (:mod:`cronsvc.outbox.router`) reads the entry, and the
router runs in the notifier: in every planner and in ``cronsvc notifier``. With neither
running, the job stays paused on the shard that saw the failures only.
"""

from __future__ import annotations

import logging

from cronsvc import audit
from cronsvc.clock import redis_ms
from cronsvc.config.models import Config
from cronsvc.errors import UnknownJob
from cronsvc.keys import Keys, all_shards
from cronsvc.outbox.entries import PAUSED, Entry
from cronsvc.outbox.router import FleetConsumer

log = logging.getLogger("cronsvc.outbox")


class AutoPause(FleetConsumer):
    """Pauses on every other shard the job a ``paused`` entry names."""

    event = PAUSED

    def needed(self, config: Config) -> bool:
        return any(job.pause_after_failures for job in config.jobs.values())

    def take(self, entry: Entry, shard: Keys) -> None:
        """Pause the job of ``entry``, paused on ``shard``, on the other shards too, and
        say so in the audit log (actor ``auto``). A job this file does not have is left
        alone, as its events are not told."""
        config = self.config()
        if entry.get("job") not in config.jobs:
            return
        job, note = str(entry.get("job")), str(entry.get("reason") or "auto")
        shards = all_shards(config.redis.shards, config.redis.prefix)
        for keys in shards:
            if keys != shard:
                try:
                    self.scripts.pause(keys, job, note)
                except UnknownJob:  # not published (any more): no fire of it to hold
                    pass
        audit.write(self.client, shards[0].audit,
                    audit.Action(int(entry.get("at") or redis_ms(self.client)), "auto",
                                 "pause", job, note, {"fires_failed": entry.get("count")}))
        log.warning("%s paused: %s", job, note, extra={"job": job})
