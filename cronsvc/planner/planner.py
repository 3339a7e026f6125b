"""The planner: publishes the job file and keeps every job's fires queued ahead.

Planning is idempotent (the plan script adds only fires later than a job's
watermark and raises it in the same step), so any number of planners may run
at once: there is no leader, and two ticking together add each fire once.
Planners holding different job files (a rolling deploy) do not undo each
other: the newest published generation wins (:mod:`cronsvc.planner.generations`).
"""

from __future__ import annotations

import json
import logging
import os
import socket
from dataclasses import dataclass
from typing import Any

import redis

from cronsvc.clock import SYSTEM, FleetClock, iso_utc, monotonic
from cronsvc.config.jobfile import JobFile
from cronsvc.config.models import Config, Job
from cronsvc.errors import Superseded
from cronsvc.keys import DEFAULT_POOL, Keys, all_shards
from cronsvc.malformed import named
from cronsvc.metrics.counters import NO_METRICS, Metrics
from cronsvc.notify.notifier import Notifier
from cronsvc.planner.batch import PlanBatch
from cronsvc.planner.generations import Newest, Verdict, compare, decide
from cronsvc.planner.publish import (
    MAX_FIRES_PER_CALL,
    by_shard,
    claim_generation,
    policy_line,
    sync_jobs,
)
from cronsvc.planner.schedules import plan_schedules
from cronsvc.planner.ticker import Ticker
from cronsvc.presence import WAKE_WITHIN_MS, alive, planner_stale_ms, planner_tick_s, process_id
from cronsvc.schedule.expand import occurrences_ms
from cronsvc.store.connection import RedisClock
from cronsvc.store.faults import REDIS_ERRORS, ErrorLog, describe
from cronsvc.store.replies import integer, json_object, text, texts
from cronsvc.store.scripts import Scripts

log = logging.getLogger("cronsvc.planner")

MIN_LOOKBACK_MS = 24 * 3600 * 1000  # a planner down for a month must not plan a month


@dataclass
class TickStats:
    """What one tick did."""

    jobs: int = 0
    added: int = 0
    stale: int = 0
    upto_ms: int = 0
    wakeups: int = 0
    schedules: int = 0  # runtime schedules looked at
    failed_shards: int = 0
    unpublished: int = 0  # jobs of the file with no watermark: published at the next sync
    verdict: str = ""  # current, publish or yield (cronsvc.planner.generations.Verdict)


class Planner:
    """Publishes a job file to Redis and plans its fires up to ``horizon`` ahead."""

    def __init__(
        self,
        job_file: str | os.PathLike[str] | JobFile,
        redis_client: redis.Redis,
        *,
        planner_id: str | None = None,
        clock: FleetClock | None = None,
        horizon: float | None = None,
        tick: float | None = None,
        metrics: Metrics | None = None,
    ) -> None:
        self.job_file = job_file if isinstance(job_file, JobFile) else JobFile(job_file)
        self.client = redis_client
        self.scripts = Scripts(redis_client)
        self.planner_id = planner_id or process_id()
        # The fleet's clock (Redis's; a test's FixedClock); this host's stamps what it saw.
        self.clock: FleetClock = clock or RedisClock(redis_client)
        self._horizon = horizon
        self._tick = tick
        # The (generation, digest) whose jobs were last published in full: a sync is due
        # whenever this differs from what is in force (:meth:`_sync_due`).
        self._synced: tuple[int, str] | None = None
        self._ticker = Ticker(self._scheduled_tick, lambda: self.tick_interval)
        self._started_ms = (clock or SYSTEM).now_ms()
        self.errors = ErrorLog(clock or SYSTEM)
        # The file changed under this planner since it last decided what to publish.
        self._changed = False
        self.generation: int | None = None  # the generation this planner's file is, if newest
        self.newest = Newest()
        self._said: set[str] = set()  # runtime schedules of jobs this file lacks, said once
        self.metrics = metrics or NO_METRICS
        self.metrics.watch_fleet(redis_client, lambda: self.config)

    @property
    def config(self) -> Config:
        """The job file in force: the last good one."""
        return self.job_file.config

    # -- settings that follow the file unless given explicitly ---------------
    @property
    def horizon(self) -> float:
        """Seconds ahead of now that fires are planned."""
        return self._horizon if self._horizon is not None else self.config.planner.horizon

    @property
    def tick_interval(self) -> float:
        """Seconds between two ticks."""
        return self._tick if self._tick is not None else self.config.planner.tick

    def _now(self) -> int:
        """Redis server time: a planner whose clock is off plans the same fires."""
        return self.clock.now_ms()

    def _script_now(self) -> int | None:
        return self.clock.script_now()

    def _shards(self) -> list[Keys]:
        return all_shards(self.config.redis.shards, self.config.redis.prefix)

    def _noted(self, exc: BaseException) -> None:
        """Remember a Redis error for status and metrics."""
        self.metrics.redis_error(self.errors.note(exc))

    # -- reload ----------------------------------------------------------------
    def reload(self, *, force: bool = False) -> bool:
        """Load the file again if it changed (or ``force``); True if a new config is in force.
        A broken file keeps the last good one in force (:class:`JobFile`)."""
        config = self.job_file.reload(force=force)
        if config is None:
            return False
        self._changed = True
        log.info("reloaded %s: %d jobs", self.job_file, len(config.jobs))
        return True

    # -- publishing ----------------------------------------------------------
    def decide(self) -> Verdict:
        """Publish this planner's file, keep it in sync, or yield to a newer one."""
        keys = self._shards()[0]
        pipe = self.client.pipeline(transaction=False)
        pipe.hgetall(keys.generation)
        pipe.hget(keys.generations, self.config.digest)
        pipe.zrange(keys.planners, 0, -1, withscores=True)
        pipe.hgetall(keys.planner_info)
        raw, published_as, seen, infos = pipe.execute()
        newest = Newest.of(texts(raw))
        now = self._now()
        verdict = decide(self.config.digest, newest,
                         published_as=None if published_as is None else int(published_as),
                         changed=self._changed,
                         newest_held=self._newest_held(newest, seen, texts(infos), now))
        self.newest = newest
        if verdict is Verdict.PUBLISH:
            gen = claim_generation(self.scripts, self.config, self.planner_id, newest,
                                   script_now=self._script_now())
            if gen is None:  # another file came first: look again at the next tick
                self.generation = None
                return Verdict.YIELD
            self.newest = Newest(gen, self.config.digest, self.planner_id, now,
                                 len(self.config.jobs))
        elif verdict is Verdict.CURRENT:
            gen = newest.gen
        else:
            gen = None
        self._changed = False
        self.generation = gen
        return verdict

    def _newest_held(self, newest: Newest, seen: list[tuple[Any, float]],
                     infos: dict[str, str], now: int) -> bool:
        """Whether a live planner other than this one holds the newest file (or has just
        published it: its first heartbeat follows its publish)."""
        if newest.at_ms is not None and alive(newest.at_ms, now,
                                              planner_stale_ms(self.tick_interval)):
            return True
        for member, last in seen:
            pid = text(member)
            info = json_object(infos.get(pid)) or {}
            if pid == self.planner_id or info.get("digest") != newest.digest:
                continue
            if alive(int(last), now, planner_stale_ms(planner_tick_s(info))):
                return True
        return False

    def sync(self) -> None:
        """Publish new, changed and removed jobs of this planner's generation
        (:func:`cronsvc.planner.publish.sync_jobs`): a conflict or a shard down is tried
        again at the next tick, a newer generation makes the next tick decide again."""
        if self.generation is None:
            return
        synced = (self.generation, self.config.digest)
        try:
            again = sync_jobs(
                self.client, self.scripts, self.config, self.generation, now_ms=self._now(),
                horizon_ms=int(self.horizon * 1000), script_now=self._script_now(),
                noted=self._noted)
        except Superseded:
            self.generation = None
            return
        self._synced = None if again else synced

    def _sync_due(self) -> bool:
        """Whether this planner's generation is not known to be published in full: a new
        generation or file, a sync that did not finish, or a tick that found a job of it
        unpublished (its watermark missing) or planned by another generation."""
        return self.generation is not None and self._synced != (self.generation,
                                                                 self.config.digest)

    def _disagreement(self) -> str:
        """How this planner's file differs from the published one, for its log line."""
        published: dict[str, str] = {}
        for keys in self._shards():
            published.update(texts(self.client.hgetall(keys.jobs)))
        mine = {name: policy_line(job) for name, job in self.config.jobs.items()}
        return compare(mine, published).summary()

    # -- planning --------------------------------------------------------------
    def tick(self) -> TickStats:
        """Reload if the file changed, publish if needed, plan up to now + horizon."""
        started = monotonic()
        self.reload()
        try:
            verdict = self.decide()
        except REDIS_ERRORS as exc:  # the first shard may be down while others plan on
            self._noted(exc)
            log.warning("cannot read the published generation; keeping the last decision: %s",
                        describe(exc))
            verdict = Verdict.CURRENT if self.generation is not None else Verdict.YIELD
        if verdict is Verdict.YIELD:
            self._say_yielding()
        elif self._sync_due():
            self.sync()
        stats = self._plan()
        if stats.unpublished or stats.stale:
            self._synced = None  # publish again at the next tick
        stats.verdict = verdict.value
        try:
            self._heartbeat(stats)
        except REDIS_ERRORS as exc:  # its shard may be down while others plan on
            self._noted(exc)
            log.warning("cannot record this planner's heartbeat: %s", describe(exc))
        self.metrics.ticked(stats.added)
        failed = f", {stats.failed_shards} shard(s) unreachable" if stats.failed_shards else ""
        log.info("tick: %d jobs, %d fires added, %d stale, planned to %s (%.0f ms)%s",
                 stats.jobs, stats.added, stats.stale, iso_utc(stats.upto_ms),
                 (monotonic() - started) * 1000, failed)
        return stats

    def _say_yielding(self) -> None:
        """The warning a planner gives every tick while another job file is the newest."""
        n = self.newest
        try:
            differs = self._disagreement()
        except REDIS_ERRORS as exc:
            self._noted(exc)
            differs = "cannot compare"
        log.warning("%s is not the published job file (generation %d, from %s at %s): "
                    "publishing nothing, planning only the jobs both define alike (%s)",
                    self.job_file, n.gen, n.planner,
                    iso_utc(n.at_ms) if n.at_ms is not None else "?", differs)

    def _plan(self) -> TickStats:
        now = self._now()
        upto = now + int(self.horizon * 1000)
        stats = TickStats(jobs=len(self.config.jobs), upto_ms=upto)
        for keys, jobs in by_shard(self.config).items():
            try:
                if jobs:
                    self._plan_shard(keys, jobs, now, upto, stats)
                added, seen = plan_schedules(self.scripts, keys, now, upto, MIN_LOOKBACK_MS,
                                             self.tick_interval, self._pool_of,
                                             self.config.jobs.__contains__, self._said)
                stats.added += added
                stats.schedules += seen
            except REDIS_ERRORS as exc:
                self._noted(exc)
                stats.failed_shards += 1
                log.warning("cannot plan shard %s, trying again at the next tick: %s",
                            keys.shard, describe(exc))
        return stats

    def _pool_of(self, job: str) -> str:
        """The pool of ``job`` in this planner's file (a job it does not have: the default;
        its fires are dropped as removed when due)."""
        found = self.config.jobs.get(job)
        return found.pool if found is not None else DEFAULT_POOL

    def _plan_shard(self, keys: Keys, jobs: list[Job], now: int, upto: int,
                    stats: TickStats) -> None:
        marks = self.client.hmget(keys.watermarks, [j.name for j in jobs])
        batches: dict[str, PlanBatch] = {}
        for job, mark in zip(jobs, marks, strict=True):
            if mark is None:  # not published (or wiped): publish first
                stats.unpublished += 1
                continue
            wm = integer(mark)
            if wm is None:
                # Written by hand: plan from now, as a new definition does (a fire already
                # due may have run); the plan script writes a time over it.
                log.warning("job %s: planning from now: %s", job.name,
                            named(keys.watermarks, job.name, f"{text(mark)!r} is not a time"))
                wm = now
            if wm >= upto:
                continue
            floor = now - max(MIN_LOOKBACK_MS, int((job.starting_deadline or 0) * 1000))
            if wm < floor:
                log.warning("job %s: planned only up to %s; fires before %s are not planned",
                            job.name, iso_utc(wm), iso_utc(floor))
            batch = batches.get(job.pool)
            if batch is None:  # each pool's fires go to its own queue
                batch = batches[job.pool] = PlanBatch(self.scripts, keys.with_pool(job.pool),
                                                      MAX_FIRES_PER_CALL)
            batch.add(job, occurrences_ms(job, max(wm, floor), upto), upto)
        earliest: int | None = None
        for batch in batches.values():
            batch.flush()
            stats.added += batch.added
            if batch.stale:
                # Another generation's schedule for these jobs: planned by its own planners.
                stats.stale += len(batch.stale)
            if batch.earliest is not None:
                earliest = min(batch.earliest, earliest or batch.earliest)
        if earliest is not None and earliest < now + WAKE_WITHIN_MS:
            self.client.publish(keys.wakeup, "plan")
            stats.wakeups += 1

    def _heartbeat(self, stats: TickStats) -> None:
        keys = self._shards()[0]
        now = self._now()
        info = {"pid": os.getpid(), "host": socket.gethostname(), "config": str(self.job_file),
                "file": self.job_file.state(),
                "started": self._started_ms, "last_tick": now, "jobs": stats.jobs,
                "added": stats.added, "stale": stats.stale, "planned_to": stats.upto_ms,
                "horizon": self.horizon, "tick": self.tick_interval,
                "digest": self.config.digest, "generation": self.generation,
                "verdict": stats.verdict, "last_error": self.errors.as_info()}
        pipe = self.client.pipeline(transaction=False)
        pipe.zadd(keys.planners, {self.planner_id: now})
        pipe.hset(keys.planner_info, self.planner_id, json.dumps(info, separators=(",", ":")))
        pipe.execute()

    def unregister(self) -> None:
        """Remove this planner from the live list (clean shutdown)."""
        keys = self._shards()[0]
        pipe = self.client.pipeline(transaction=False)
        pipe.zrem(keys.planners, self.planner_id)
        pipe.hdel(keys.planner_info, self.planner_id)
        pipe.execute()

    # -- running -------------------------------------------------------------
    def run_forever(self) -> None:
        """Tick at once, then every ``tick_interval``, until :meth:`stop`, SIGTERM or SIGINT.

        SIGHUP reloads the file. Ticks never overlap; late ones are coalesced.
        """
        log.info("planner %s started: %d jobs from %s, horizon %.0fs, tick %.0fs",
                 self.planner_id, len(self.config.jobs), self.job_file, self.horizon,
                 self.tick_interval)
        self.job_file.watch(self.request_reload)
        notifier = Notifier(self.client, lambda: self.config, role="planner")
        notifier.start()
        try:
            self._ticker.run()
        finally:
            notifier.stop()
            self.job_file.stop()
            try:
                self.unregister()
            except REDIS_ERRORS as exc:
                log.warning("cannot remove this planner from the live list: %s", describe(exc))
            log.info("planner %s stopped", self.planner_id)

    def stop(self) -> None:
        """Make :meth:`run_forever` return after the tick in progress."""
        self._ticker.stop()

    def request_reload(self) -> None:
        """Read the file again now (SIGHUP does this), even if its mtime is unchanged."""
        self._ticker.request()

    def _scheduled_tick(self, reload_requested: bool) -> None:
        try:
            if reload_requested:
                log.info("reload requested")
                self.reload(force=True)
            self.tick()
        except REDIS_ERRORS as exc:
            self._noted(exc)
            log.warning("tick failed, trying again at the next one: %s", describe(exc))
        except Exception:  # the planner outlives any one bad tick
            log.exception("tick failed")

