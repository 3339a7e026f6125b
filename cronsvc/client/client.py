"""The Python API of a running fleet: what the CLI wraps and applications call.

    from cronsvc import Client
    c = Client()  # or Client("redis://host:6379/0")
    fid = c.trigger("nightly-report")
    c.pause("nightly-report", note="migration until 14:00")

A client needs only the Redis URL; without one it finds Redis as the CLI does
(``$CRONSVC_REDIS_URL``, redis.url of its config, then the embedded server of a
``cronsvc up`` running in this directory). Give it the job file too (``config=``)
when the fleet uses shards or a key prefix, so it finds the same keys. Everything it
lists comes from Redis (what the planners published), never from a local file.
Results are the plain dataclasses of :mod:`cronsvc.client.views`.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

import redis

from cronsvc.client.audit import AuditLog, AuditPage, default_actor
from cronsvc.client.backfill import Backfill, BackfillOps, Instant, Progress
from cronsvc.client.core import Core
from cronsvc.client.fleet import QUEUE_SCAN, FleetReader
from cronsvc.client.jobs import MAX_CATCH_UP, JobOps
from cronsvc.client.schedules import ScheduleOps, SchedulePage
from cronsvc.client.views import (
    Aside,
    DeadFire,
    FireView,
    JobInfo,
    JobQueue,
    Listing,
    LiveChunk,
    Member,
    Pause,
    PoolView,
    QueueView,
    Resumed,
    Status,
)
from cronsvc.config.models import Config, load_config
from cronsvc.errors import BadArgument
from cronsvc.keys import Keys
from cronsvc.planner.publish import publish_file
from cronsvc.presence import process_id
from cronsvc.process.redis_url import find_redis_url
from cronsvc.schedule.expand import Fire
from cronsvc.schedule.runtime import Outcome, RuntimeSchedule
from cronsvc.store.connection import connect
from cronsvc.store.scripts import Scripts

__all__ = ["MAX_CATCH_UP", "Client"]


class Client:
    """Operations on the fleet that uses one Redis (or one set of shards).

    Each method hands its call on to one part: reading the fleet (jobs, next_fires,
    history, queue, dead, status, ...) is :class:`cronsvc.client.fleet.FleetReader`,
    changing jobs and fires :class:`cronsvc.client.jobs.JobOps`, runtime schedules
    :class:`cronsvc.client.schedules.ScheduleOps`, backfill
    :class:`cronsvc.client.backfill.BackfillOps`, the audit log
    :class:`cronsvc.client.audit.AuditLog`. The parts share one
    :class:`cronsvc.client.core.Core` (the connection, scripts, keys, server clock and
    audited writes), each through a Protocol of what it uses of it. Every change is
    written to the audit log as done by ``actor`` (by default the OS user).
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
            url = find_redis_url(url, config.redis.url if config else None)  # as the CLI
            if not url:
                raise BadArgument("Client needs a Redis URL: pass one, set CRONSVC_REDIS_URL "
                                  "or redis.url in its config, or run `cronsvc up` in this "
                                  "directory (its embedded Redis is found)")
            client = connect(url, cluster=(config.redis.cluster or None) if config else None)
        self._compose(Core(client, config.redis.shards if config else 1,
                           config.redis.prefix if config else "", actor or default_actor()))

    def _compose(self, core: Core) -> None:
        """Make the parts around ``core``. They keep no state of their own, so a client
        acting as another actor is new parts around a copy of the core."""
        self._core = core
        self._fleet = FleetReader(core)
        self._jobs = JobOps(core, self._fleet)
        self._schedules = ScheduleOps(core)
        self._backfills = BackfillOps(core, self._schedules.get_schedule)
        self._audit = AuditLog(core)

    def acting_as(self, actor: str) -> Client:
        """This client, on the same connection, writing ``actor`` to the audit log."""
        other = copy.copy(self)
        other._compose(self._core.acting_as(actor))
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

    # -- what the parts share ----------------------------------------------------------
    @property
    def redis(self) -> redis.Redis:
        return self._core.redis

    @property
    def scripts(self) -> Scripts:
        return self._core.scripts

    @property
    def shards(self) -> int:
        return self._core.shards

    @property
    def prefix(self) -> str:
        return self._core.prefix

    @property
    def actor(self) -> str:
        return self._core.actor

    def keys(self, job: str) -> Keys:
        return self._core.keys(job)

    def keys_of_fire(self, fid: str) -> Keys:
        """The keys of the shard that holds the fire (its schedule's, else its job's), with
        the queue and working set of its job's pool."""
        return self._core.keys_of_fire(fid)

    def pools_of(self, keys: Keys, jobs: Iterable[str]) -> dict[str, str]:
        """The pool of each of ``jobs``, from the lines of shard ``keys`` (``job_lines``: of
        every job); a job not published there: the default."""
        return self._core.pools_of(keys, jobs)

    def server_ms(self) -> int:
        """The Redis server clock, the only clock the fleet goes by."""
        return self._core.server_ms()

    def published_jobs(self) -> list[str]:
        """Names of the jobs the planners have published."""
        return self._core.published_jobs()

    def require_job(self, job: str) -> Keys:
        """The keys of a published job, with its pool's queue and working set; UnknownJob
        naming close matches if there is none."""
        return self._core.require_job(job)

    def audited(self, action: str, target: str, note: str | None = None, *,
                by: str | None = None, at_ms: int | None = None, **detail: Any) -> None:
        """Write one entry for an action that just took effect (at ``at_ms`` if the
        script that made it said when, else now), done by this core's actor or ``by``
        (the actor a call named)."""
        self._core.audited(action, target, note, by=by, at_ms=at_ms, **detail)

    # -- reading the fleet ------------------------------------------------------------
    def pools(self) -> list[str]:
        """Every pool the published jobs or the workers name, ``default`` first."""
        return self._fleet.pools()

    def served_pools(self, now_ms: int) -> set[str]:
        """The pools some live worker serves."""
        return self._fleet.served_pools(now_ms)

    def pool_views(self, now_ms: int, workers: list[Member]) -> list[PoolView]:
        """Each pool: its jobs, the live workers serving it, its due fires."""
        return self._fleet.pool_views(now_ms, workers)

    def histories(self, jobs: list[str], count: int) -> list[list[str]]:
        """Per job, its newest ``count`` history lines (raw JSON, as Redis holds them: any
        may not be a record), newest first."""
        return self._fleet.histories(jobs, count)

    def jobs(self) -> Listing[JobInfo]:
        """Every published job with its schedule, next fire, last run and pause, by name."""
        return self._fleet.jobs()

    def jobs_named(self, names: Sequence[str]) -> Listing[JobInfo]:
        """The published jobs among ``names``, in that order: what a page of a long list
        reads (a few round trips per shard, whatever the number of jobs)."""
        return self._fleet.jobs_named(names)

    def job(self, job: str) -> JobInfo:
        """One published job (UnknownJob with close names if there is none)."""
        return self._fleet.job(job)

    def next_fires(self, job: str, count: int = 5, *, after_ms: int | None = None) -> list[int]:
        """The next ``count`` fire times (ms) of the published schedule of ``job``."""
        return self._fleet.next_fires(job, count, after_ms=after_ms)

    def upcoming(self, job: str, count: int = 10) -> list[Fire]:
        """The next ``count`` slots of the published schedule of ``job``, with DST notes
        (as ``cronsvc next`` shows them)."""
        return self._fleet.upcoming(job, count)

    def history(self, job: str, count: int = 20) -> Listing[dict[str, Any]]:
        """The records of the newest ``count`` fires of ``job``, newest first (all of each
        fire's: its list is read whole, as long as the job's history cap).

        A job removed from the file keeps its history until it expires by cap;
        UnknownJob only when there is neither a published job nor a history.
        """
        return self._fleet.history(job, count)

    def zones(self) -> dict[str, str]:
        """Job -> time zone of every published job (times in tables are local to it)."""
        return self._fleet.zones()

    def fire_state(self, fid: str) -> str:
        """Where a fire is: ``queued``, ``running``, ``dead``, ``done`` (in the job's
        history) or ``unknown``."""
        return self._fleet.fire_state(fid)

    def fire(self, fid: str) -> FireView:
        """Where a fire is, and each attempt of it the job's history holds (BadArgument if
        ``fid`` is not a fire id)."""
        return self._fleet.fire(fid)

    def live_output(self, fid: str, after: str = "0-0", count: int = 1000) -> list[LiveChunk]:
        """What the runs of fire ``fid`` printed while they went, after the chunk ``after``
        (``0-0``: from the first kept), ``count`` chunks at most: empty once nothing more
        came, and for a run that ended before it streamed (its stored output holds it)."""
        return self._fleet.live_output(fid, after, count)

    def queue_by_job(self, scan: int = QUEUE_SCAN) -> tuple[list[JobQueue], bool]:
        """The queue summed up per job: due now, planned ahead, in flight, dead, and the
        oldest due; and whether a shard's queue held more than ``scan`` fires (then only
        its first ``scan``, by due time, are counted)."""
        return self._fleet.queue_by_job(scan)

    def queue(self, limit: int = 20) -> QueueView:
        """Due fires, fires planned ahead (the first ``limit`` of each) and every fire in
        flight with its lease deadline and worker, over all shards."""
        return self._fleet.queue(limit)

    def dead(self, job: str | None = None) -> Listing[DeadFire]:
        """Dead fires (of ``job`` only, if given), most recently dead first."""
        return self._fleet.dead(job)

    def status(self) -> Status:
        """Live planners and workers with their heartbeats, how Redis is set up and how full
        it is, which job file is published, and what the workers' files cannot run."""
        return self._fleet.status()

    def malformed(self, limit: int = 100) -> Aside:
        """The entries set aside (cronsvc/malformed.py), newest first, of every shard: the
        first ``limit``, and how many there are."""
        return self._fleet.malformed(limit)

    # -- changing jobs and fires -------------------------------------------------------
    def enqueue(self, job: str, when: int | datetime | timedelta, payload: Any = None, *,
                kind: str = "at", note: str | None = None) -> str:
        """Run ``job`` once at ``when`` with ``payload``; the new fire's id.

        ``when``: ms since the epoch (server clock), an aware datetime, or a
        timedelta from the server's now; not in the past and at most ``RANGE_YEARS``
        (10) years ahead (BadTime otherwise). The payload (any JSON value, at most
        ``MAX_PAYLOAD_BYTES``, 64 KiB, as JSON: BadArgument otherwise) reaches the run
        as ``CRONSVC_PAYLOAD`` or ``ctx.payload``.
        """
        return self._jobs.enqueue(job, when, payload, kind=kind, note=note)

    def trigger(self, job: str, payload: Any = None, *, note: str | None = None) -> str:
        """Run ``job`` once now, beside its schedule (paused or not); the new fire's id.

        Skipped, and nothing queued, if the job's overlap, max_concurrent or a named limit
        would skip it now (a run in flight under ``overlap: forbid``, every slot taken); a
        run that starts meanwhile may still make the worker skip it, as its history says.
        """
        return self._jobs.trigger(job, payload, note=note)

    def cancel(self, fid: str, *, note: str | None = None) -> bool:
        """Unqueue a fire not started yet; False if it is not queued (running or done).

        BadArgument if ``fid`` is not a fire id.
        """
        return self._jobs.cancel(fid, note=note)

    def pause(self, job: str, note: str | None = None, *, wait: float | None = None) -> Pause:
        """Stop new fires of ``job`` on every worker at once.

        No claim after this call starts a cron fire of the job: each is dropped
        and recorded as skipped (reason ``paused``). Fires claimed before are
        returned in ``in_flight`` and not stopped; with ``wait`` (seconds), the
        call returns only once they ended, so nothing of the job runs after it
        (triggers and ``at`` runs asked for later still do). StillRunning if
        they do not end in time; the job stays paused either way.
        """
        return self._jobs.pause(job, note, wait=wait)

    def resume(self, job: str, *, catch_up: bool = False, note: str | None = None) -> Resumed:
        """Let ``job`` fire again from now; true if it was paused at run time.

        Fires due while it was paused were dropped when due. ``catch_up`` queues
        them again with their own fire ids as the job's ``catch_up`` policy says
        (``latest``: the newest, ``all``: each, at most MAX_CATCH_UP, ``none``:
        none). They then meet the usual rules, the starting deadline included.
        """
        return self._jobs.resume(job, catch_up=catch_up, note=note)

    def dead_retry(self, fid: str, *, note: str | None = None) -> None:
        """Queue a dead fire again now, with the job's full set of attempts.

        UnknownFire if it is not dead; UnknownJob if its job is no longer published;
        CronsvcError if it is a cron fire of a paused job (it would only be skipped).
        """
        self._jobs.dead_retry(fid, note=note)

    def dead_purge(self, job: str | None = None, *, fires: list[str] | None = None,
                   note: str | None = None) -> int:
        """Forget dead fires (of ``job`` only, or only ``fires``, if given) with their
        attempts and payloads; how many went."""
        return self._jobs.dead_purge(job, fires=fires, note=note)

    # -- runtime schedules -------------------------------------------------------------
    def upsert_schedule(self, id: str, *, job: str, **fields: Any) -> Outcome:
        """Create the schedule ``id`` or make it what is given: ``created``, ``changed`` or
        ``unchanged``. Fields: exactly one of ``cron`` or ``every`` (``'90m'``, seconds or
        a ``timedelta``), ``anchor``, ``timezone``, ``start``, ``end``, ``max_runs``,
        ``payload`` (JSON, at most 64 KiB), ``paused``, ``catch_up``,
        ``starting_deadline``, ``jitter``, ``overlap`` and ``actor``. BadSchedule names
        the field that is wrong; the job must be one the planners published."""
        return self._schedules.upsert_schedule(id, job=job, **fields)

    def upsert_schedules(self, items: Iterable[Mapping[str, Any]]) -> list[Outcome]:
        """:meth:`upsert_schedule` for many at once, in a few round trips per shard: the
        outcome of each, in order. Every item is checked before anything changes."""
        return self._schedules.upsert_schedules(items)

    def delete_schedule(self, id: str) -> bool:
        """Delete the schedule and unqueue its fires that have not started (those in
        flight finish); False if there was none."""
        return self._schedules.delete_schedule(id)

    def pause_schedule(self, id: str, *, actor: str | None = None) -> Outcome:
        """Stop the schedule's fires until :meth:`resume_schedule` (its queued fires go)."""
        return self._schedules.pause_schedule(id, actor=actor)

    def resume_schedule(self, id: str, *, actor: str | None = None) -> Outcome:
        """Fire again from now on (fires due while it was paused do not run)."""
        return self._schedules.resume_schedule(id, actor=actor)

    def get_schedule(self, id: str) -> RuntimeSchedule:
        """The schedule ``id``; UnknownSchedule if there is none."""
        return self._schedules.get_schedule(id)

    def schedules(self, *, job: str | None = None, prefix: str | None = None,
                  cursor: str | None = None, limit: int = 100) -> SchedulePage:
        """A page of schedules (about ``limit``; of ``job`` and ids starting with
        ``prefix`` only, if given), read with HSCAN: never the whole set in one call."""
        return self._schedules.schedules(job=job, prefix=prefix, cursor=cursor, limit=limit)

    def count_schedules(self, *, job: str | None = None) -> int:
        """How many schedules there are (of ``job``, if given)."""
        return self._schedules.count_schedules(job=job)

    # -- backfill ----------------------------------------------------------------------
    def backfill(self, target: str, start: Instant, end: Instant = "now", *,
                 dry_run: bool = False, max_concurrent: int = 1, tz: str | None = None,
                 note: str | None = None, planned: Callable[[Backfill], None] | None = None,
                 progress: Progress | None = None, poll: float = 0.05) -> Backfill:
        """Run the fires of ``target`` (a job, else a runtime schedule id) due from ``start``
        to ``end`` (both included; an end past now is now) that did not run,
        ``max_concurrent`` at a time, in due order; returns once the last one ended
        (``planned`` is called with the plan first, ``progress`` as each fire ends).
        ``dry_run``: only say which.

        ``start`` and ``end``: ms since the epoch, aware datetimes, or text: ISO 8601 (a
        date alone is its midnight; without an offset it is read in ``tz``, by default the
        schedule's zone), ``now``, or ``-2d`` / ``-6h`` before now.

        The fires are those of the schedule as published now. ``start`` may be at most
        35 days ago (:data:`cronsvc.ran.REACH_MS`): older runs are no longer recorded.
        The job's overlap and limits still hold: a job with ``overlap: forbid`` runs its
        backfilled fires one at a time, and never beside one of its own runs.
        """
        return self._backfills.backfill(target, start, end, dry_run=dry_run,
                                        max_concurrent=max_concurrent, tz=tz, note=note,
                                        planned=planned, progress=progress, poll=poll)

    # -- the audit log -----------------------------------------------------------------
    def audit(self, *, limit: int = 50, cursor: int | None = None) -> AuditPage:
        """A page of the audit log, newest first."""
        return self._audit.audit(limit=limit, cursor=cursor)
