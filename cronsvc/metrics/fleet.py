"""The fleet's state in Redis as Prometheus gauges, read when Prometheus scrapes.

Only planners register this collector, so the series exist once per planner rather
than once per worker.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from cronsvc.clock import redis_ms
from cronsvc.schedule.expand import Spec
from cronsvc.store.faults import describe
from cronsvc.store.replies import json_object, text

if TYPE_CHECKING:
    import redis
    from prometheus_client.metrics_core import Metric

    from cronsvc.config.models import Config
    from cronsvc.schedule.expand import JobLike

log = logging.getLogger("cronsvc.metrics")

# Per scrape, the history heads of at most this many jobs are read; the others keep
# the value of an earlier scrape (jobs take turns), so a scrape stays a few ms.
HISTORY_JOBS_PER_SCRAPE = 2000
# Windows searched, shortest first, for a job's fires around now: an every-second job
# looks at one minute, a yearly one at most a few years.
DAY_MS = 86_400_000
SPANS_MS = (60_000, 3_600_000, 2 * DAY_MS, 40 * DAY_MS, 400 * DAY_MS, 2930 * DAY_MS)


# -- the fleet, read at scrape time ------------------------------------------------
@dataclass(frozen=True)
class FireTimes:
    """A job's two latest fires at or before some instant and its first one after."""

    previous: int | None
    last: int | None
    next: int | None


def fire_times(job: JobLike, now_ms: int) -> FireTimes:
    """The fires around ``now_ms`` from the job's schedule (None: none within ~8 years)."""
    from cronsvc.schedule.expand import occurrences_ms

    ahead = _search(lambda span: occurrences_ms(job, now_ms, now_ms + span), 1)
    behind = _search(lambda span: occurrences_ms(job, now_ms - span, now_ms), 2)
    return FireTimes(behind[-2] if len(behind) > 1 else None,
                     behind[-1] if behind else None, ahead[0] if ahead else None)


def _search(fires: Callable[[int], list[int]], want: int) -> list[int]:
    found: list[int] = []
    for span in SPANS_MS:
        found = fires(span)
        if len(found) >= want:
            break
    return found


class FleetCollector:
    """Reads the fleet's state from Redis when Prometheus scrapes.

    Per shard: queue and lease sizes, fires due, the oldest due fire. Fleet wide:
    live workers and their slots (from their presence entries). Per job of the
    config: its schedule's previous, last and next fire (computed, not read from
    the queue: finding one job's fires there would scan the whole queue), its
    last success (from its history head), and whether it is paused.
    """

    def __init__(self, client: redis.Redis, config: Callable[[], Config]) -> None:
        self.client = client
        self.config = config
        self._lock = threading.Lock()  # scrapes may overlap; the caches are shared
        self._fires: dict[str, tuple[Spec, int, FireTimes]] = {}
        self._success: dict[str, int] = {}
        self._heads: dict[str, str] = {}
        self._turn = 0

    def collect(self) -> Iterator[Metric]:
        import redis
        from prometheus_client.core import GaugeMetricFamily

        with self._lock:
            try:
                families = self._collect()
                ok = 1
            except redis.RedisError as exc:
                log.warning("metrics: cannot read the fleet state: %s", describe(exc))
                families, ok = [], 0
        yield GaugeMetricFamily("cronsvc_redis_up", "1 if this scrape could read Redis.", ok)
        yield from families

    def _collect(self) -> list[Metric]:
        from prometheus_client.core import GaugeMetricFamily as G

        from cronsvc.keys import DEFAULT_POOL, all_shards
        from cronsvc.presence import WORKER_STALE_MS

        config = self.config()
        shards = all_shards(config.redis.shards, config.redis.prefix)
        pools = sorted({DEFAULT_POOL, *(job.pool for job in config.jobs.values())})
        queues = [k.with_pool(pool) for k in shards for pool in pools]
        now = redis_ms(self.client)
        pipe = self.client.pipeline(transaction=False)
        for keys in queues:  # each pool's queue and working set
            pipe.zcard(keys.queue)
            pipe.zcount(keys.queue, "-inf", now)
            pipe.zrange(keys.queue, 0, 0, withscores=True)
            pipe.zcard(keys.working)
        for keys in shards:  # what the pools of a shard share
            pipe.zcard(keys.dead)
            pipe.hkeys(keys.paused)
            pipe.hgetall(keys.schedule_counts)
        pipe.zrangebyscore(shards[0].workers, now - WORKER_STALE_MS, "+inf")
        replies = pipe.execute()
        live = [text(w) for w in replies.pop()]
        depth = G("cronsvc_queue_depth", "Fires queued (planned ahead or due).",
                  labels=["shard", "pool"])
        pool_due = G("cronsvc_pool_due", "Fires due and not claimed yet, per pool.",
                     labels=["pool"])
        due_of: dict[str, int] = {}
        due = in_flight = dead = 0
        oldest: int | None = None
        paused = {name for name, job in config.jobs.items() if job.paused}
        schedules = G("cronsvc_runtime_schedules", "Runtime schedules, per job they run.",
                      labels=["job"])
        per_job: dict[str, int] = {}
        for i, keys in enumerate(queues):
            size, n_due, head, working = replies[4 * i:4 * i + 4]
            depth.add_metric([str(keys.shard or 0), keys.pool], size)
            due_of[keys.pool] = due_of.get(keys.pool, 0) + n_due
            due, in_flight = due + n_due, in_flight + working
            if head and (oldest is None or head[0][1] < oldest):
                oldest = int(head[0][1])
        shared = replies[4 * len(queues):]
        for i in range(len(shards)):
            n_dead, held, counts = shared[3 * i:3 * i + 3]
            for job, count in counts.items():
                per_job[text(job)] = per_job.get(text(job), 0) + int(count)
            paused.update(text(j) for j in held)
            dead += n_dead
        busy = slots = 0
        serving: dict[str, int] = dict.fromkeys(pools, 0)
        if live:
            for raw in self.client.hmget(shards[0].worker_info, live):
                info = json_object(raw) or {}
                busy, slots = busy + int(info.get("busy", 0)), slots + int(info.get("slots", 0))
                for pool in info.get("pools") or [DEFAULT_POOL]:
                    serving[pool] = serving.get(pool, 0) + 1
        pool_workers = G("cronsvc_pool_workers", "Live workers serving each pool the job file "
                         "names (0: its fires wait for one).", labels=["pool"])
        for pool, n in sorted(serving.items()):
            pool_workers.add_metric([pool], n)
        for pool, n in sorted(due_of.items()):
            pool_due.add_metric([pool], n)
        lateness = max(now - oldest, 0) / 1000 if oldest is not None else 0.0
        for job, count in sorted(per_job.items()):
            schedules.add_metric([job], count)
        families: list[Metric] = [
            depth,
            pool_due,
            pool_workers,
            schedules,
            G("cronsvc_due_now", "Fires due and not claimed yet.", due),
            G("cronsvc_in_flight", "Fires claimed and leased (running).", in_flight),
            G("cronsvc_oldest_due_lateness_seconds",
              "How long the oldest due fire has waited (0: nothing due).", lateness),
            G("cronsvc_dead_letters", "Fires in the dead letters.", dead),
            G("cronsvc_workers_live", "Workers whose presence is recent (as cronsvc status).",
              len(live)),
            G("cronsvc_fleet_busy_slots", "Runs in progress, summed over live workers.", busy),
            G("cronsvc_fleet_slots", "Slots, summed over live workers.", slots),
            *self._memory(),
        ]
        return families + self._jobs(config, now, paused)

    def _memory(self) -> list[Metric]:
        """Redis memory against maxmemory: at the limit, writes fail with OOM."""
        import redis
        from prometheus_client.core import GaugeMetricFamily as G

        try:
            info = self.client.info("memory")
        except redis.ResponseError:  # an ACL user without INFO
            return []
        if info and all(isinstance(v, dict) for v in info.values()):
            info = next(iter(info.values()))  # a cluster client answers per node
        return [G("cronsvc_redis_used_memory_bytes", "Memory Redis uses (INFO used_memory).",
                  int(info.get("used_memory", 0))),
                G("cronsvc_redis_maxmemory_bytes", "Redis maxmemory (0: no limit); writes fail "
                  "with OOM once used memory reaches it.", int(info.get("maxmemory", 0)))]

    def _jobs(self, config: Config, now: int, paused: set[str]) -> list[Metric]:
        from prometheus_client.core import GaugeMetricFamily as G

        names = sorted(config.jobs)
        for gone in set(self._fires) - set(names):
            self._fires.pop(gone, None)
            self._success.pop(gone, None)
            self._heads.pop(gone, None)
        self._read_successes(config, names)
        prev = G("cronsvc_job_previous_fire_timestamp_seconds",
                 "The scheduled fire before the last one.", labels=["job"])
        last = G("cronsvc_job_last_fire_timestamp_seconds",
                 "The latest scheduled fire at or before now.", labels=["job"])
        nxt = G("cronsvc_job_next_fire_timestamp_seconds",
                "The next scheduled fire.", labels=["job"])
        success = G("cronsvc_job_last_success_timestamp_seconds",
                    "When the job's newest ok run in its history ended.", labels=["job"])
        held = G("cronsvc_job_paused", "1 for each paused job (absent: not paused).",
                 labels=["job"])
        for name in names:
            times = self._fire_times(config.jobs[name], now)
            for family, ms in ((prev, times.previous), (last, times.last), (nxt, times.next),
                               (success, self._success.get(name))):
                if ms is not None:
                    family.add_metric([name], ms / 1000)
            if name in paused:
                held.add_metric([name], 1)
        return [prev, last, nxt, success, held]

    def _fire_times(self, job: JobLike, now: int) -> FireTimes:
        spec = Spec.of(job)
        cached = self._fires.get(job.name)
        if cached is not None and cached[0] == spec and now < cached[1]:
            return cached[2]
        times = fire_times(job, now)
        # Valid until the next fire; a job with none soon is looked at again in an hour.
        self._fires[job.name] = (spec, times.next or now + 3_600_000, times)
        return times

    def _read_successes(self, config: Config, names: list[str]) -> None:
        """Refresh the last success of the jobs whose turn it is: LINDEX 0 of each history
        list (one per shard in a sharded fleet, where a runtime schedule's runs are kept on
        the schedule's shard), and the whole (capped) lists only of those whose heads
        changed and are not ok."""
        from cronsvc.keys import all_shards, keys_for

        if not names:
            return
        count = min(len(names), HISTORY_JOBS_PER_SCRAPE)
        turn = [names[(self._turn + i) % len(names)] for i in range(count)]
        self._turn = (self._turn + count) % len(names)
        shards, prefix = config.redis.shards, config.redis.prefix
        keys = {n: [keys_for(n, shards, prefix).history(n)] if shards <= 1 else
                [k.history(n) for k in all_shards(shards, prefix)] for n in turn}
        pipe = self.client.pipeline(transaction=False)
        for name in turn:
            for key in keys[name]:
                pipe.lindex(key, 0)
        replies = iter(pipe.execute())
        deeper: list[str] = []
        for name in turn:
            heads = [text(raw) if raw is not None else "" for raw in
                     (next(replies) for _ in keys[name])]
            head = "\n".join(heads)
            if head == self._heads.get(name):
                continue
            self._heads[name] = head
            found = [ms for ms in map(_success_ms, heads) if ms is not None]
            if found:
                self._success[name] = max([*found, self._success.get(name, 0)])
            if len(found) < sum(1 for h in heads if h):
                deeper.append(name)
        if not deeper:
            return
        for name in deeper:
            for key in keys[name]:
                pipe.lrange(key, 0, -1)
        replies = iter(pipe.execute())
        for name in deeper:
            for _ in keys[name]:
                newest = next((ms for ms in map(_success_ms, map(text, next(replies)))
                               if ms is not None), None)
                if newest is not None:
                    self._success[name] = max(newest, self._success.get(name, newest))


def _success_ms(raw: str) -> int | None:
    """End of the run a history line records, if it is an ok run."""
    record = json_object(raw)
    if not record or record.get("status") != "ok" or record.get("started") is None:
        return None
    return int(record["started"]) + int(record.get("duration_ms") or 0)

