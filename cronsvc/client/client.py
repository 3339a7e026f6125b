"""The Python API of a running fleet: what the CLI wraps and applications call.

    from cronsvc import Client
    c = Client("redis://localhost:6379/0")
    fid = c.trigger("nightly-report")
    c.pause("nightly-report", note="migration until 14:00")

A client needs only the Redis URL. Give it the job file too (``config=``) when
the fleet uses shards or a key prefix, so it finds the same keys. Everything it
lists comes from Redis (what the planners published), never from a local file.
Results are the plain dataclasses of :mod:`cronsvc.client.views`.
"""

from __future__ import annotations

import copy
import json
import time
from datetime import datetime, timedelta
from typing import Any

import redis

from cronsvc.client.audit import AuditLog, default_actor
from cronsvc.client.backfill import BackfillOps
from cronsvc.client.fleet import FleetReader
from cronsvc.client.schedules import ScheduleOps
from cronsvc.client.views import Pause, Policy, Resumed, in_flight, spec_of
from cronsvc.clock import dt_to_ms, monotonic
from cronsvc.config.models import Config, load_config
from cronsvc.errors import (
    BadArgument,
    BadTime,
    CronsvcError,
    StillRunning,
    UnknownFire,
    UnknownJob,
)
from cronsvc.fires import fire_id, new_tag, parse_fire
from cronsvc.keys import Keys
from cronsvc.planner.publish import publish_file
from cronsvc.presence import process_id
from cronsvc.schedule.expand import occurrences_ms
from cronsvc.schedule.runtime import payload_problem
from cronsvc.schedule.when import due_problem
from cronsvc.store.connection import connect
from cronsvc.store.replies import text
from cronsvc.store.scripts import Scripts

__all__ = ["MAX_CATCH_UP", "Client"]

#: ``resume(catch_up=True)`` queues at most this many missed fires (the newest).
MAX_CATCH_UP = 1000
_CATCH_UP_WINDOW_MS = 3_600_000
_CATCH_UP_WINDOW_MAX_MS = 32 * 86_400_000


class Client(AuditLog, ScheduleOps, BackfillOps, FleetReader):
    """Operations on the fleet that uses one Redis (or one set of shards).

    The reading half (jobs, next_fires, history, queue, dead, status, ...) is
    :class:`cronsvc.client.fleet.FleetReader`, runtime schedules
    :class:`cronsvc.client.schedules.ScheduleOps`, backfill
    :class:`cronsvc.client.backfill.BackfillOps`, the audit log
    :class:`cronsvc.client.audit.AuditLog`; this class adds what changes state. Every
    change is written to the audit log as done by ``actor`` (by default the OS user).
    """

    def __init__(
        self,
        url: str | None = None,
        *,
        config: str | Config | None = None,
        client: redis.Redis | None = None,
        actor: str | None = None,
    ) -> None:
        if isinstance(config, str):
            config = load_config(config)
        self.config = config
        if client is None:
            if url is None:
                url = config.redis.url if config else None
            if not url:
                raise BadArgument("Client needs a Redis URL (or a config with redis.url)")
            client = connect(url, cluster=(config.redis.cluster or None) if config else None)
        super().__init__(client, config.redis.shards if config else 1,
                         config.redis.prefix if config else "")
        self.scripts = Scripts(client, prefix=self.prefix)
        self.actor = actor or default_actor()

    def acting_as(self, actor: str) -> Client:
        """This client, on the same connection, writing ``actor`` to the audit log."""
        other = copy.copy(self)
        other.actor = actor
        return other

    def publish_config(self) -> int:
        """Publish the client's job file now as the newest generation, even if planners
        hold another one (a rollback on purpose); the generation it is now."""
        if self.config is None:
            raise BadArgument("publish_config needs the client's config")
        # The file as it reads now, as a planner started on it would publish it.
        generation = publish_file(self.redis, self.scripts, load_config(self.config.source),
                                  planner_id=process_id())
        assert generation is not None  # forced: never yields
        return generation

    # -- one-off runs ----------------------------------------------------------
    def enqueue(self, job: str, when: int | datetime | timedelta, payload: Any = None, *,
                kind: str = "at", note: str | None = None) -> str:
        """Run ``job`` once at ``when`` with ``payload``; the new fire's id.

        ``when``: ms since the epoch (server clock), an aware datetime, or a
        timedelta from the server's now; not in the past and at most ``RANGE_YEARS``
        (10) years ahead (BadTime otherwise). The payload (any JSON value, at most
        ``MAX_PAYLOAD_BYTES``, 64 KiB, as JSON: BadArgument otherwise) reaches the run
        as ``CRONSVC_PAYLOAD`` or ``ctx.payload``.
        """
        problem = payload_problem(payload)
        if problem:
            raise BadArgument(f"{job}: payload: {problem}")
        keys = self.require_job(job)
        now = self.server_ms()
        if isinstance(when, timedelta):
            due_ms = now + int(when / timedelta(milliseconds=1))
        elif isinstance(when, datetime):
            if when.tzinfo is None:
                raise BadTime(f"{job}: {when.isoformat()}: naive datetime: give a time zone")
            due_ms = dt_to_ms(when)
        else:
            due_ms = int(when)
        problem = due_problem(due_ms, now)
        if problem:
            raise BadTime(f"{job}: due time {due_ms} ms {problem}")
        fid = fire_id(job, due_ms, new_tag(kind))
        self.scripts.enqueue(keys, fid, due_ms, payload)
        if due_ms <= now + 1000:
            self.redis.publish(keys.wakeup, "enqueue")
        self.audited(kind, job, note, fire=fid)
        return fid

    def trigger(self, job: str, payload: Any = None, *, note: str | None = None) -> str:
        """Run ``job`` once now, beside its schedule (paused or not); the new fire's id."""
        return self.enqueue(job, timedelta(0), payload, kind="trigger", note=note)

    def cancel(self, fid: str, *, note: str | None = None) -> bool:
        """Unqueue a fire not started yet; False if it is not queued (running or done).

        BadArgument if ``fid`` is not a fire id.
        """
        parse_fire(fid)
        done = self.scripts.cancel(self.keys_of_fire(fid), fid)
        if done:
            self.audited("cancel", fid, note)
        return done

    # -- pause -----------------------------------------------------------------
    def pause(self, job: str, note: str | None = None, *, wait: float | None = None) -> Pause:
        """Stop new fires of ``job`` on every worker at once.

        No claim after this call starts a cron fire of the job: each is dropped
        and recorded as skipped (reason ``paused``). Fires claimed before are
        returned in ``in_flight`` and not stopped; with ``wait`` (seconds), the
        call returns only once they ended, so nothing of the job runs after it
        (triggers and ``at`` runs asked for later still do). StillRunning if
        they do not end in time; the job stays paused either way.
        """
        keys = self.require_job(job)
        since, held = self.scripts.pause(keys, job, note or "")
        for other in self._other_shards(keys):
            try:
                held += self.scripts.pause(other, job, note or "")[1]
            except UnknownJob:  # that shard has no line of it yet: no fire of it runs there
                pass
        result = Pause(job, since, note or "", [in_flight(*h) for h in held])
        self.audited("pause", job, note)
        if wait is None or not result.in_flight:
            return result
        left = self._wait_done([f.fire for f in result.in_flight], wait)
        if left:
            raise StillRunning(f"{job} is paused, but {len(left)} run(s) claimed before are "
                               f"still running after {wait:g}s: {', '.join(left)}")
        return Pause(job, since, note or "", result.in_flight, waited=True)

    def _other_shards(self, keys: Keys) -> list[Keys]:
        """The shards but ``keys``'s: a job paused or resumed in a sharded fleet is so on
        each, where its runtime schedules' fires are claimed."""
        if self.shards <= 1:
            return []
        return [k.with_pool(keys.pool) for k in self._shards() if k.shard != keys.shard]

    def _wait_done(self, fires: list[str], timeout: float) -> list[str]:
        """Poll until none of ``fires`` is in flight; those still in flight at the end."""
        deadline = monotonic() + timeout
        while True:
            pipe = self.redis.pipeline(transaction=False)
            for fid in fires:
                pipe.zscore(self.keys_of_fire(fid).working, fid)
            fires = [f for f, s in zip(fires, pipe.execute(), strict=True) if s is not None]
            if not fires or monotonic() >= deadline:
                return fires
            time.sleep(0.05)  # an operator command waiting on other processes' runs

    def resume(self, job: str, *, catch_up: bool = False, note: str | None = None) -> Resumed:
        """Let ``job`` fire again from now; true if it was paused at run time.

        Fires due while it was paused were dropped when due. ``catch_up`` queues
        them again with their own fire ids as the job's ``catch_up`` policy says
        (``latest``: the newest, ``all``: each, at most MAX_CATCH_UP, ``none``:
        none). They then meet the usual rules, the starting deadline included.
        """
        keys = self.require_job(job)
        policy = Policy.parse(text(self.redis.hget(keys.jobs, job)))
        for _ in range(5):
            pause_json, truncated = "", False
            fires: list[str] = []
            if catch_up:
                raw = self.redis.hget(keys.paused, job)
                if raw is not None:
                    pause_json = text(raw)
                    fires, truncated = self._missed(keys, job, pause_json, policy.catch_up)
            status, queued_again = self.scripts.resume(keys, job, pause_json, fires)
            if status >= 0:
                break
        else:
            raise CronsvcError(f"the pause of {job} keeps changing: try again")
        for other in self._other_shards(keys):
            self.scripts.resume(other, job)
        self.audited("resume", job, note, catch_up=catch_up or None,
                     queued_again=len(queued_again) or None)
        if queued_again:
            self.redis.publish(keys.wakeup, "resume")
        return Resumed(job, status == 1, queued_again, policy.catch_up if catch_up else "",
                       truncated, policy.paused_in_file)

    def _missed(self, keys: Keys, job: str, pause_json: str,
                catch_up: str) -> tuple[list[str], bool]:
        """Fire ids due since the pause began, newest ``latest``/MAX_CATCH_UP of them."""
        want = {"latest": 1, "all": MAX_CATCH_UP}.get(catch_up, 0)
        since = int(json.loads(pause_json).get("since") or 0)
        spec_json = self.redis.hget(keys.specs, job)
        if not want or not since or spec_json is None:
            return [], False
        spec = spec_of(job, text(spec_json))
        # Walk back from now in growing windows: a long pause of a busy job stays cheap.
        hi, size = self.server_ms(), _CATCH_UP_WINDOW_MS
        dues: list[int] = []
        while hi > since and len(dues) <= want:
            lo = max(since, hi - size)
            dues = occurrences_ms(spec, lo, hi) + dues
            hi, size = lo, min(size * 2, _CATCH_UP_WINDOW_MAX_MS)
        truncated = catch_up == "all" and len(dues) > want
        return [fire_id(job, d) for d in dues[-want:]], truncated

    # -- dead fires --------------------------------------------------------------
    def dead_retry(self, fid: str, *, note: str | None = None) -> None:
        """Queue a dead fire again now, with the job's full set of attempts.

        UnknownFire if it is not dead; UnknownJob if its job is no longer published;
        CronsvcError if it is a cron fire of a paused job (it would only be skipped).
        """
        job, _, tag = parse_fire(fid)
        keys = self.keys_of_fire(fid)
        if not self.redis.hexists(self.keys(job).jobs, job):
            raise self._unknown_job(job, f" (fire {fid}): a dead fire of a removed job cannot "
                                         "run again; `cronsvc dead purge --job` forgets it")
        if tag is None and self.job(job).paused:
            raise CronsvcError(f"{job} is paused: a retried cron fire would be skipped; "
                               f"resume it first (or `cronsvc trigger {job}`)")
        if not self.scripts.retry_dead(keys, fid):
            raise UnknownFire(f"fire {fid} is not dead (it is {self.fire_state(fid)})")
        self.redis.publish(keys.wakeup, "retry")
        self.audited("retry", fid, note)

    def dead_purge(self, job: str | None = None, *, fires: list[str] | None = None,
                   note: str | None = None) -> int:
        """Forget dead fires (of ``job`` only, or only ``fires``, if given) with their
        attempts and payloads; how many went."""
        if fires:
            for fid in fires:
                parse_fire(fid)  # BadArgument for what is not a fire id
            by_shard: dict[Keys, list[str]] = {}
            for fid in fires:
                by_shard.setdefault(self.keys_of_fire(fid), []).append(fid)
            gone = sum(self.scripts.purge_dead(keys, job, group)
                       for keys, group in by_shard.items())
            target = fires[0] if len(fires) == 1 else f"{len(fires)} fires"
        else:
            gone = sum(self.scripts.purge_dead(keys, job) for keys in self._shards_of(job))
            target = job or "*"
        if gone:
            self.audited("purge", target, note, fires=gone)
        return gone

