"""The planner: publishes the job file and keeps every job's fires queued ahead.

Planning is idempotent (the plan script adds only fires later than a job's
watermark and raises it in the same step), so any number of planners may run
at once: there is no leader, and two ticking together add each fire once.
"""

from __future__ import annotations

import json
import logging
import os
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import redis

from .clock import SYSTEM, Clock, iso_utc, monotonic
from .config import Config, Job, load_config
from .errors import ConfigError
from .keys import Keys, all_shards, keys_for
from .metrics import NO_METRICS, Metrics
from .planning import PlanBatch, Published, diff
from .schedule import occurrences_ms
from .scripts import Scripts
from .ticking import Ticker

log = logging.getLogger("cronsvc.planner")

MAX_FIRES_PER_CALL = 5000  # keeps one script call short: Redis serves nobody meanwhile
MIN_LOOKBACK_MS = 24 * 3600 * 1000  # a planner down for a month must not plan a month
WAKE_WITHIN_MS = 5000  # new fires due this soon may be earlier than a worker's next wake-up


def default_planner_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


@dataclass
class TickStats:
    """What one tick did."""

    jobs: int = 0
    added: int = 0
    stale: int = 0
    upto_ms: int = 0
    wakeups: int = 0
    failed_shards: int = 0


class Planner:
    """Publishes a job file to Redis and plans its fires up to ``horizon`` ahead."""

    def __init__(
        self,
        config_path: str | os.PathLike[str],
        redis_client: redis.Redis,
        *,
        planner_id: str | None = None,
        clock: Clock = SYSTEM,
        horizon: float | None = None,
        tick: float | None = None,
        metrics: Metrics | None = None,
    ) -> None:
        self.config_path = Path(config_path)
        self._stat = _file_stat(self.config_path)
        self.config: Config = load_config(self.config_path)
        self.client = redis_client
        self.scripts = Scripts(redis_client)
        self.planner_id = planner_id or default_planner_id()
        self.clock = clock
        self._horizon = horizon
        self._tick = tick
        self._needs_sync = True
        self._ticker = Ticker(self._scheduled_tick, lambda: self.tick_interval)
        self._started_ms = clock.now_ms()
        self.metrics = metrics or NO_METRICS
        self.metrics.watch_fleet(redis_client, lambda: self.config)

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
        if self.clock is not SYSTEM:
            return self.clock.now_ms()
        try:
            sec, usec = self.client.time()
        except redis.RedisError:  # on a cluster TIME may pick a node that is down
            return self.clock.now_ms()
        return int(sec) * 1000 + int(usec) // 1000

    def _script_now(self) -> int | None:
        # Scripts use the Redis clock; only an injected clock (tests) overrides it.
        return None if self.clock is SYSTEM else self.clock.now_ms()

    def _shards(self) -> list[Keys]:
        return all_shards(self.config.redis.shards, self.config.redis.prefix)

    def _by_shard(self) -> dict[Keys, list[Job]]:
        groups: dict[Keys, list[Job]] = {k: [] for k in self._shards()}
        for job in self.config.jobs.values():
            keys = keys_for(job.name, self.config.redis.shards, self.config.redis.prefix)
            groups.setdefault(keys, []).append(job)
        return groups

    # -- reload ----------------------------------------------------------------
    def reload(self, *, force: bool = False) -> bool:
        """Load the file again if it changed (or ``force``); True if a new config is in force.

        A broken file is logged, one located problem per line, and the last
        good config stays.
        """
        stat = _file_stat(self.config_path)
        if stat == self._stat and not force:
            return False
        self._stat = stat
        try:
            config = load_config(self.config_path)
        except ConfigError as exc:
            log.error("%s is invalid; keeping the last good config (%d jobs)",
                      self.config_path, len(self.config.jobs))
            for problem in exc.problems:
                log.error("%s", problem)
            return False
        if config == self.config:
            return False
        self.config = config
        self._needs_sync = True
        log.info("reloaded %s: %d jobs", self.config_path, len(config.jobs))
        return True

    # -- publishing ----------------------------------------------------------
    def sync(self) -> None:
        """Publish new, changed and removed jobs; unqueue fires of old definitions.

        A job another planner changed since we read it is a conflict: logged,
        and tried again at the next tick.
        """
        now = self._now()
        retry = False
        for keys, jobs in self._by_shard().items():
            try:
                retry |= self._sync_shard(keys, jobs, now)
            except redis.RedisError as exc:
                # One shard down (a cluster master failing over) must not stop the others.
                retry = True
                log.warning("cannot publish to shard %s, trying again at the next tick: %s",
                            keys.shard, exc)
        self._needs_sync = retry

    def _sync_shard(self, keys: Keys, jobs: list[Job], now: int) -> bool:
        """Publish one shard's jobs; True if a conflict needs another try."""
        pipe = self.client.pipeline(transaction=False)
        pipe.hgetall(keys.jobs)
        pipe.hgetall(keys.specs)
        pipe.hgetall(keys.watermarks)
        pipe.zrange(keys.queue, 0, 0, withscores=True)
        lines, specs, marks, lowest = pipe.execute()
        have = Published(_strs(lines), _strs(specs), _strs(marks),
                         int(lowest[0][1]) if lowest else None)
        changes = diff({j.name: j for j in jobs}, have, now, int(self.horizon * 1000))
        if not changes:
            return False
        changed = 0
        retry = False
        for part in changes.chunks(MAX_FIRES_PER_CALL):
            result = self.scripts.publish(keys, part.sets, part.removals, part.fires,
                                          now_ms=self._script_now())
            changed += result.changed
            for job in result.conflicts:
                retry = True
                log.warning("job %s was changed by another planner meanwhile; "
                            "publishing again at the next tick", job)
        log.info("published %d job(s), removed %d, unqueued %d old fire(s)",
                 len(changes.sets), len(changes.removals), len(changes.fires))
        if changed:
            self.client.publish(keys.wakeup, "publish")
        return retry

    # -- planning --------------------------------------------------------------
    def tick(self) -> TickStats:
        """Reload if the file changed, publish if needed, plan up to now + horizon."""
        started = monotonic()
        self.reload()
        if self._needs_sync:
            self.sync()
        stats = self._plan()
        try:
            self._heartbeat(stats)
        except redis.RedisError as exc:  # its shard may be down while others plan on
            log.warning("cannot record this planner's heartbeat: %s", exc)
        self.metrics.ticked(stats)
        failed = f", {stats.failed_shards} shard(s) unreachable" if stats.failed_shards else ""
        log.info("tick: %d jobs, %d fires added, %d stale, planned to %s (%.0f ms)%s",
                 stats.jobs, stats.added, stats.stale, iso_utc(stats.upto_ms),
                 (monotonic() - started) * 1000, failed)
        return stats

    def _plan(self) -> TickStats:
        now = self._now()
        upto = now + int(self.horizon * 1000)
        stats = TickStats(jobs=len(self.config.jobs), upto_ms=upto)
        for keys, jobs in self._by_shard().items():
            if not jobs:
                continue
            try:
                self._plan_shard(keys, jobs, now, upto, stats)
            except redis.RedisError as exc:
                stats.failed_shards += 1
                log.warning("cannot plan shard %s, trying again at the next tick: %s",
                            keys.shard, exc)
        return stats

    def _plan_shard(self, keys: Keys, jobs: list[Job], now: int, upto: int,
                    stats: TickStats) -> None:
        marks = self.client.hmget(keys.watermarks, [j.name for j in jobs])
        batch = PlanBatch(self.scripts, keys, MAX_FIRES_PER_CALL, self._script_now())
        for job, mark in zip(jobs, marks, strict=True):
            if mark is None:  # not published (or wiped): publish first
                self._needs_sync = True
                continue
            wm = int(mark)
            if wm >= upto:
                continue
            floor = now - max(MIN_LOOKBACK_MS, int((job.starting_deadline or 0) * 1000))
            if wm < floor:
                log.warning("job %s: planned only up to %s; fires before %s are not planned",
                            job.name, iso_utc(wm), iso_utc(floor))
            batch.add(job, occurrences_ms(job, max(wm, floor), upto), upto)
        batch.flush()
        stats.added += batch.added
        if batch.stale:
            stats.stale += len(batch.stale)
            self._needs_sync = True
            log.warning("published definition of %s differs (another planner with another "
                        "file?); publishing again", ", ".join(sorted(batch.stale)))
        if batch.earliest is not None and batch.earliest < now + WAKE_WITHIN_MS:
            self.client.publish(keys.wakeup, "plan")
            stats.wakeups += 1

    def _heartbeat(self, stats: TickStats) -> None:
        keys = self._shards()[0]
        now = self._now()
        info = {"pid": os.getpid(), "host": socket.gethostname(), "config": str(self.config_path),
                "started": self._started_ms, "last_tick": now, "jobs": stats.jobs,
                "added": stats.added, "stale": stats.stale, "planned_to": stats.upto_ms,
                "horizon": self.horizon, "tick": self.tick_interval}
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
                 self.planner_id, len(self.config.jobs), self.config_path, self.horizon,
                 self.tick_interval)
        try:
            self._ticker.run()
        finally:
            try:
                self.unregister()
            except redis.RedisError as exc:
                log.warning("cannot remove this planner from the live list: %s", exc)
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
        except redis.RedisError as exc:
            log.warning("tick failed, trying again at the next one: %s", exc)
        except Exception:  # the planner outlives any one bad tick
            log.exception("tick failed")


def _file_stat(path: Path) -> tuple[int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_mtime_ns, st.st_size


def _strs(mapping: dict[Any, Any]) -> dict[str, str]:
    return {_s(k): _s(v) for k, v in mapping.items()}


def _s(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
