"""Chains: the jobs the end of a fire triggers (``on_success``, ``on_failure``), queued.

The script that records how a fire ended pushes, in the same call, a ``chain`` entry onto
the outbox naming the jobs to run next (``lua/includes/outbox.lua``: ``chained``). This
consumer queues each of them once per upstream fire: the downstream fire's id derives from
the upstream's (:func:`cronsvc.fires.chain_fire`) and ``lua/chain-5.lua`` queues an id
once ever, so an entry read twice queues nothing twice. The payload names the upstream job,
fire, status, attempt and output tail; the downstream job's history gets a ``chained`` line.

Nothing but the outbox router (:mod:`cronsvc.outbox.router`) reads the entry, and the
router runs in the notifier: in every planner and in ``cronsvc notifier``. With neither
running, the entries wait in the outbox and no downstream job runs.
"""

from __future__ import annotations

import logging

from cronsvc.clock import redis_ms
from cronsvc.config.models import Config
from cronsvc.fires import chain_fire
from cronsvc.history import record
from cronsvc.keys import DEFAULT_POOL, Keys, keys_for
from cronsvc.outbox.entries import CHAIN, Entry
from cronsvc.outbox.router import FleetConsumer

log = logging.getLogger("cronsvc.outbox")


class Chains(FleetConsumer):
    """Queues the jobs a ``chain`` entry names."""

    event = CHAIN

    def needed(self, config: Config) -> bool:
        return any(job.on_success or job.on_failure for job in config.jobs.values())

    def take(self, entry: Entry, shard: Keys) -> None:
        """Queue the jobs the end of an upstream fire triggers, each once ever, with the
        upstream job, fire, status and output tail as their payload."""
        config = self.config()
        upstream, job = str(entry.get("fire")), str(entry.get("job"))
        due = int(entry.get("at") or redis_ms(self.client))
        payload = {"upstream": {"job": job, "fire": upstream, "status": entry.get("status"),
                                "attempt": entry.get("attempt"),
                                "output": entry.get("output")}}
        for target in str(entry.get("next") or "").split(","):
            if not target:
                continue
            spec = config.jobs.get(target)
            keys = keys_for(target, config.redis.shards, config.redis.prefix,
                            spec.pool if spec else DEFAULT_POOL)
            fid = chain_fire(target, upstream, due)
            line = record(fid, "chained", reason=f"after {upstream}: {entry.get('status')}")
            done = self.scripts.chain(keys, fid, due, payload, line, config.worker.history)
            if done == 1:
                self.client.publish(keys.wakeup, "chain")
                log.info("%s: %s ended (%s), queued %s", job, upstream, entry.get("status"),
                         fid, extra={"job": target, "fire": fid})
            elif done < 0:
                log.warning("%s: %s ended, but %s is not published: not queued", job,
                            upstream, target, extra={"job": target})
