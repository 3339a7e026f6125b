"""What every part of :class:`cronsvc.Client` shares: the connection and its scripts,
where a job's or a fire's keys are, the server clock, the published jobs, and the
audited write each change ends with.

The parts (the fleet reader, job, schedule and backfill operations, the audit log)
each take this core through a Protocol of what they use of it, so what one part
needs of the others is written down, and checked by mypy.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable
from typing import Any

import redis

from cronsvc.audit import Action, write
from cronsvc.clock import redis_ms
from cronsvc.errors import UnknownJob, did_you_mean
from cronsvc.fires import job_of, placed_by
from cronsvc.keys import DEFAULT_POOL, Keys, all_shards, keys_for
from cronsvc.policy import Policy
from cronsvc.store.replies import text
from cronsvc.store.scripts import Scripts


class Core:
    """One fleet's Redis (or set of shards) as a client acting for ``actor`` sees it."""

    def __init__(self, client: redis.Redis, shards: int, prefix: str, actor: str) -> None:
        self.redis = client
        self.shards = shards
        self.prefix = prefix
        self.scripts = Scripts(client)
        self.actor = actor

    def acting_as(self, actor: str) -> Core:
        """This core, on the same connection and scripts, writing ``actor`` to the audit log."""
        other = copy.copy(self)
        other.actor = actor
        return other

    # -- where things are ------------------------------------------------------------
    def keys(self, job: str) -> Keys:
        return keys_for(job, self.shards, self.prefix)

    def keys_of_fire(self, fid: str) -> Keys:
        """The keys of the shard that holds the fire (its schedule's, else its job's), with
        the queue and working set of its job's pool."""
        keys = keys_for(placed_by(fid), self.shards, self.prefix)
        job = job_of(fid)
        return keys.with_pool(self.pools_of(keys, [job])[job])

    def pools_of(self, keys: Keys, jobs: Iterable[str]) -> dict[str, str]:
        """The pool of each of ``jobs``, from the lines of shard ``keys`` (``job_lines``: of
        every job); a job not published there: the default."""
        names = sorted(set(jobs))
        lines = self.redis.hmget(keys.job_lines, names) if names else []
        return {name: pool_of_line(line) for name, line in zip(names, lines, strict=True)}

    def all_shards(self) -> list[Keys]:
        return all_shards(self.shards, self.prefix)

    def shards_of(self, job: str | None) -> list[Keys]:
        """The shards that may hold fires of ``job`` (every shard: of any job, or in a sharded
        fleet, where its runtime schedules' fires live on the shards of their ids)."""
        return [self.keys(job)] if job and self.shards <= 1 else self.all_shards()

    def server_ms(self) -> int:
        """The Redis server clock, the only clock the fleet goes by."""
        return redis_ms(self.redis)

    # -- the published jobs ----------------------------------------------------------
    def published_jobs(self) -> list[str]:
        """Names of the jobs the planners have published."""
        names: list[str] = []
        for keys in self.all_shards():
            names += [text(k) for k in self.redis.hkeys(keys.jobs)]
        return sorted(names)

    def require_job(self, job: str) -> Keys:
        """The keys of a published job, with its pool's queue and working set; UnknownJob
        naming close matches if there is none."""
        keys = self.keys(job)
        line = self.redis.hget(keys.jobs, job)
        if line is not None:
            return keys.with_pool(Policy.parse(text(line)).pool)
        raise self.unknown_job(job)

    def unknown_job(self, job: str, extra: str = "") -> UnknownJob:
        """The error for a job that is not published, naming close matches."""
        known = self.published_jobs()
        hint = did_you_mean(job, known, n=3, quote=False) or (
            "" if known else "; no job is published (is a planner running?)")
        return UnknownJob(f"unknown job {job!r}{extra}{hint}")

    # -- the audit log -----------------------------------------------------------------
    def audited(self, action: str, target: str, note: str | None = None, *,
                by: str | None = None, at_ms: int | None = None, **detail: Any) -> None:
        """Write one entry for an action that just took effect (at ``at_ms`` if the
        script that made it said when, else now), done by this core's actor or ``by``
        (the actor a call named)."""
        write(self.redis, self.all_shards()[0].audit,
              Action(self.server_ms() if at_ms is None else at_ms, by or self.actor, action,
                     target, note or None, {k: v for k, v in detail.items() if v is not None}))


def pool_of_line(line: Any) -> str:
    """The pool of a job from its line in ``job_lines`` (None: not published there, the
    default pool)."""
    return Policy.parse(text(line)).pool if line is not None else DEFAULT_POOL
