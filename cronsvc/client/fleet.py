"""Read-only views of a fleet: jobs, history, queue, dead fires, planners and workers.

:class:`FleetReader` is the reading part of :class:`cronsvc.Client`; it only
reads Redis (and the server clock), so it is safe to call from anywhere: what it
takes of the client's core (:class:`FleetContext`) has no scripts and no audit log.
"""

from __future__ import annotations

import collections
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import redis

from cronsvc.client.costs import runs_memory
from cronsvc.client.views import (
    LAST_RUN_SCAN,
    Aside,
    DeadFire,
    FireView,
    InFlight,
    JobInfo,
    JobQueue,
    Listing,
    LiveChunk,
    Member,
    PoolView,
    QueuedFire,
    QueueView,
    Status,
    definition_gaps,
    in_flight,
    job_info,
    live_chunks,
    member,
    newest_first,
    queued,
    records,
    score_ms,
    spec_of,
)
from cronsvc.clock import iso_utc, ms_to_dt
from cronsvc.errors import ScheduleError, UnknownJob
from cronsvc.fires import is_fire_id, job_of, kind_of, parse_fire
from cronsvc.history import HISTORY_MAX, in_order, newest_fires
from cronsvc.keys import DEFAULT_POOL, Keys
from cronsvc.malformed import named, parse
from cronsvc.notify.notifier import pending
from cronsvc.policy import Policy
from cronsvc.presence import WORKER_STALE_MS, planner_stale_ms, planner_tick_s
from cronsvc.schedule.expand import Fire, next_fires, upcoming
from cronsvc.store.replies import integer, json_object, opt_text, text
from cronsvc.store.scripts import UNHELD_MS

__all__ = ["FleetContext", "FleetReader"]

#: Queued fires read per shard to sum the queue up per job.
QUEUE_SCAN = 100_000


class FleetContext(Protocol):
    """What the reader takes of the client's core (:class:`cronsvc.client.core.Core`)."""

    redis: redis.Redis
    shards: int

    def keys(self, job: str) -> Keys: ...
    def keys_of_fire(self, fid: str) -> Keys: ...
    def all_shards(self) -> list[Keys]: ...
    def shards_of(self, job: str | None) -> list[Keys]: ...
    def server_ms(self) -> int: ...
    def published_jobs(self) -> list[str]: ...
    def require_job(self, job: str) -> Keys: ...
    def unknown_job(self, job: str, extra: str = "") -> UnknownJob: ...


class FleetReader:
    """What a fleet on one Redis (or one set of shards) holds, read from Redis."""

    def __init__(self, core: FleetContext) -> None:
        self.core = core
        self.redis = core.redis  # the connection it reads

    def _pool_jobs(self) -> collections.Counter[str]:
        """How many published jobs each pool has."""
        pipe = self.redis.pipeline(transaction=False)
        for keys in self.core.all_shards():
            pipe.hgetall(keys.jobs)
        return collections.Counter(Policy.parse(text(line)).pool
                                   for lines in pipe.execute() for line in lines.values())

    def _workers(self, now_ms: int) -> list[Member]:
        """Every worker that reported in, live or not, with what it said of itself."""
        keys = self.core.all_shards()[0]
        pipe = self.redis.pipeline(transaction=False)
        pipe.zrange(keys.workers, 0, -1, withscores=True)
        pipe.hgetall(keys.worker_info)
        seen, infos = pipe.execute()
        return [member(text(w), at, infos.get(w), now_ms, WORKER_STALE_MS) for w, at in seen]

    def pools(self) -> list[str]:
        """Every pool the published jobs or the workers name, ``default`` first."""
        found = {DEFAULT_POOL, *self._pool_jobs(),
                 *_serving(self._workers(self.core.server_ms()), live_only=False)}
        return sorted(found, key=lambda p: (p != DEFAULT_POOL, p))

    def served_pools(self, now_ms: int) -> set[str]:
        """The pools some live worker serves."""
        return set(_serving(self._workers(now_ms)))

    def pool_views(self, now_ms: int, workers: list[Member]) -> list[PoolView]:
        """Each pool: its jobs, the live workers serving it, its due fires."""
        jobs, serving = self._pool_jobs(), _serving(workers)
        names = sorted({DEFAULT_POOL, *jobs, *serving}, key=lambda p: (p != DEFAULT_POOL, p))
        pipe = self.redis.pipeline(transaction=False)
        for pool in names:
            for keys in self.core.all_shards():
                pipe.zcount(keys.with_pool(pool).queue, "-inf", now_ms)
                pipe.zrange(keys.with_pool(pool).queue, 0, 0, withscores=True)
        replies = iter(pipe.execute())
        views = []
        for pool in names:
            due, firsts = 0, []
            for _ in self.core.all_shards():
                n, first = next(replies), next(replies)
                due += int(n)
                if n and first:
                    firsts.append(score_ms(first[0][1]))
            views.append(PoolView(pool, jobs[pool], serving[pool], due, min(firsts, default=None)))
        return views

    def _queues(self) -> list[Keys]:
        """The queue and working set of every pool on every shard."""
        pools = self.pools()
        return [k.with_pool(pool) for k in self.core.all_shards() for pool in pools]

    def _history_keys(self, job: str) -> list[str]:
        """Where the job's history lives: its shard's list, and in a sharded fleet every
        shard's (a runtime schedule's runs are recorded on the shard of the schedule)."""
        if self.core.shards <= 1:
            return [self.core.keys(job).history(job)]
        return [k.history(job) for k in self.core.all_shards()]

    def histories(self, jobs: list[str], count: int) -> list[list[str]]:
        """Per job, its newest ``count`` history lines (raw JSON, as Redis holds them: any
        may not be a record), newest first."""
        pipe = self.redis.pipeline(transaction=False)
        for job in jobs:
            for key in self._history_keys(job):
                pipe.lrange(key, 0, count - 1)
        replies = iter(pipe.execute())
        return [newest_first([[text(r) for r in next(replies)] for _ in self._history_keys(j)],
                             count) for j in jobs]

    # -- jobs ------------------------------------------------------------------
    def jobs(self) -> Listing[JobInfo]:
        """Every published job with its schedule, next fire, last run and pause, by name."""
        return self.jobs_named(self.core.published_jobs())

    def jobs_named(self, names: Sequence[str]) -> Listing[JobInfo]:
        """The published jobs among ``names``, in that order: what a page of a long list
        reads (a few round trips per shard, whatever the number of jobs)."""
        now = self.core.server_ms()
        by_shard: dict[Keys, list[str]] = {}
        for name in names:
            by_shard.setdefault(self.core.keys(name), []).append(name)
        found: dict[str, tuple[str, str | None, str | None]] = {}
        for keys, group in by_shard.items():
            pipe = self.redis.pipeline(transaction=False)
            for key in (keys.jobs, keys.specs, keys.paused):
                pipe.hmget(key, group)
            lines, specs, pauses = pipe.execute()
            for name, line, spec, pause in zip(group, lines, specs, pauses, strict=True):
                if line is not None:
                    found[name] = (text(line), opt_text(spec), opt_text(pause))
        listed = [n for n in names if n in found]
        jobs: Listing[JobInfo] = Listing()
        for name, lines in zip(listed, self.histories(listed, LAST_RUN_SCAN), strict=True):
            keys = self.core.keys(name)
            line, spec, _ = found[name]
            if not Policy.is_line(line):
                jobs.unreadable.append(named(keys.jobs, name, "not a policy line"))
                continue
            try:
                jobs.append(job_info(name, *found[name], records(keys.history(name), lines,
                                                                 jobs.unreadable), now))
            except (ValueError, TypeError, AttributeError, ScheduleError) as exc:
                jobs.unreadable.append(named(keys.specs, name, f"{spec!r}: {exc}"))
        return jobs

    def job(self, job: str) -> JobInfo:
        """One published job (UnknownJob with close names if there is none)."""
        self.core.require_job(job)
        return self.jobs_named([job])[0]

    def next_fires(self, job: str, count: int = 5, *, after_ms: int | None = None) -> list[int]:
        """The next ``count`` fire times (ms) of the published schedule of ``job``."""
        keys = self.core.require_job(job)
        spec = spec_of(job, text(self.redis.hget(keys.specs, job)))
        return next_fires(spec, self.core.server_ms() if after_ms is None else after_ms, count)

    def upcoming(self, job: str, count: int = 10) -> list[Fire]:
        """The next ``count`` slots of the published schedule of ``job``, with DST notes
        (as ``cronsvc next`` shows them)."""
        keys = self.core.require_job(job)
        spec = spec_of(job, text(self.redis.hget(keys.specs, job)))
        if spec.cron is None and spec.every_ms is None:
            return []
        return upcoming(spec, ms_to_dt(self.core.server_ms()), count)

    def history(self, job: str, count: int = 20) -> Listing[dict[str, Any]]:
        """The records of the newest ``count`` fires of ``job``, newest first (all of each
        fire's: its list is read whole, as long as the job's history cap).

        A job removed from the file keeps its history until it expires by cap;
        UnknownJob only when there is neither a published job nor a history.
        """
        raw = self.histories([job], HISTORY_MAX)[0]
        if not raw and not self.redis.hexists(self.core.keys(job).jobs, job):
            raise self.core.unknown_job(job)
        unreadable: list[str] = []
        found = newest_fires(records(self.core.keys(job).history(job), raw, unreadable), count)
        return Listing(found, unreadable)

    def zones(self) -> dict[str, str]:
        """Job -> time zone of every published job (times in tables are local to it)."""
        found: dict[str, str] = {}
        for keys in self.core.all_shards():
            for name, spec in self._hash(keys.specs).items():
                zone = (json_object(spec) or {}).get("timezone")
                found[name] = zone if isinstance(zone, str) else "UTC"
        return found

    def _scored(self, key: str) -> list[tuple[str, float]]:
        """Every member of a sorted set with its score."""
        raw: Any = self.redis.zrange(key, 0, -1, withscores=True)
        return [(text(m), float(score)) for m, score in raw]

    def _hash(self, key: str) -> dict[str, str]:
        return {text(k): text(v) for k, v in self.redis.hgetall(key).items()}

    def fire_state(self, fid: str) -> str:
        """Where a fire is: ``queued``, ``running``, ``dead``, ``done`` (in the job's
        history) or ``unknown``."""
        return self.fire(fid).state

    def fire(self, fid: str) -> FireView:
        """Where a fire is, and each attempt of it the job's history holds (BadArgument if
        ``fid`` is not a fire id)."""
        job, due, _ = parse_fire(fid)
        keys = self.core.keys_of_fire(fid)
        pipe = self.redis.pipeline(transaction=False)
        for key in (keys.queue, keys.working, keys.dead):
            pipe.zscore(key, fid)
        pipe.hget(keys.claims, fid)
        pipe.hgetall(keys.output(fid))
        for key in self._history_keys(job):
            pipe.lrange(key, 0, -1)
        queued, lease, dead, claim, outputs, *histories = pipe.execute()
        lines = [text(raw) for one in histories for raw in one]
        attempts = in_order(with_output(r, outputs)
                            for r in records(keys.history(job), lines, [])
                            if r.get("fire") == fid)
        held = {"queued": queued, "running": lease, "dead": dead}
        state = next((name for name, score in held.items() if score is not None),
                     "done" if attempts else "unknown")
        holder = (json_object(claim) or {}).get("worker") if lease is not None else None
        return FireView(fid, job, kind_of(fid), due, state, attempts, holder,
                        score_ms(lease) if lease is not None else None)

    def live_output(self, fid: str, after: str = "0-0", count: int = 1000) -> list[LiveChunk]:
        """What the runs of fire ``fid`` printed while they went, after the chunk ``after``
        (``0-0``: from the first kept), ``count`` chunks at most: empty once nothing more
        came, and for a run that ended before it streamed (its stored output holds it)."""
        keys = self.core.keys_of_fire(fid)
        start = after if after == "0-0" else f"({after}"
        return live_chunks(self.redis.xrange(keys.live(fid), start, "+", count=count) or [])

    def queue_by_job(self, scan: int = QUEUE_SCAN) -> tuple[list[JobQueue], bool]:
        """The queue summed up per job: due now, planned ahead, in flight, dead, and the
        oldest due; and whether a shard's queue held more than ``scan`` fires (then only
        its first ``scan``, by due time, are counted)."""
        now = self.core.server_ms()
        counts: dict[str, list[int]] = {}
        oldest: dict[str, int] = {}
        cut = False
        for keys in self._queues():
            pipe = self.redis.pipeline(transaction=False)
            pipe.zrange(keys.queue, 0, scan - 1, withscores=True)
            pipe.zcard(keys.queue)
            pipe.zrange(keys.working, 0, -1)
            if keys.pool == DEFAULT_POOL:  # dead letters are the shard's, not a pool's
                pipe.zrange(keys.dead, 0, -1)
            queued, size, working, *dead_of = pipe.execute()
            dead = dead_of[0] if dead_of else []
            cut = cut or size > scan
            for fid, score in queued:
                if not is_fire_id(text(fid)):  # left for the claim to set aside
                    continue
                job, at = job_of(text(fid)), score_ms(score)
                row = counts.setdefault(job, [0, 0, 0, 0])
                row[0 if at <= now else 1] += 1
                if at <= now:
                    oldest[job] = min(oldest.get(job, at), at)
            for i, fires in ((2, working), (3, dead)):
                for fid in fires:
                    if is_fire_id(text(fid)):
                        counts.setdefault(job_of(text(fid)), [0, 0, 0, 0])[i] += 1
        return [JobQueue(job, due, ahead, held, died, oldest.get(job))
                for job, (due, ahead, held, died) in sorted(counts.items())], cut

    # -- the queue ---------------------------------------------------------------
    def queue(self, limit: int = 20) -> QueueView:
        """Due fires, fires planned ahead (the first ``limit`` of each) and every fire in
        flight with its lease deadline and worker, over all shards."""
        now = self.core.server_ms()
        due: list[QueuedFire] = []
        ahead: list[QueuedFire] = []
        held: list[InFlight] = []
        unreadable: list[str] = []
        due_count = ahead_count = 0
        oldest: int | None = None
        served = self.served_pools(now)
        for keys in self._queues():
            pipe = self.redis.pipeline(transaction=False)
            pipe.zcount(keys.queue, "-inf", now)
            pipe.zcount(keys.queue, f"({now}", "+inf")
            pipe.zrangebyscore(keys.queue, "-inf", now, start=0, num=limit, withscores=True)
            pipe.zrangebyscore(keys.queue, f"({now}", "+inf", start=0, num=limit,
                               withscores=True)
            pipe.zrange(keys.working, 0, -1, withscores=True)
            n_due, n_ahead, due_raw, ahead_raw, working = pipe.execute()
            due_count += n_due
            ahead_count += n_ahead
            if due_raw:
                first = score_ms(due_raw[0][1])
                oldest = first if oldest is None else min(oldest, first)
            due_raw = self._fires(keys.queue, due_raw, unreadable)
            ahead_raw = self._fires(keys.queue, ahead_raw, unreadable)
            listed = [f for f, _ in due_raw + ahead_raw]
            used = self.redis.hmget(keys.attempts, listed) if listed else []
            tries = {f: opt_text(n) for f, n in zip(listed, used, strict=True)}
            on = keys.pool in served
            due += [queued(f, s, tries[f], keys.pool, on) for f, s in due_raw]
            ahead += [queued(f, s, tries[f], keys.pool, on) for f, s in ahead_raw]
            held += self._in_flight(keys, self._fires(keys.working, working, unreadable))
        return QueueView(
            now_ms=now, due_count=due_count, ahead_count=ahead_count, oldest_due_ms=oldest,
            due=sorted(due, key=lambda q: q.at_ms)[:limit],
            ahead=sorted(ahead, key=lambda q: q.at_ms)[:limit],
            in_flight=sorted(held, key=lambda f: f.lease_until_ms), unreadable=unreadable,
        )

    @staticmethod
    def _fires(key: str, scored: Iterable[tuple[Any, float]], unreadable: list[str]
               ) -> list[tuple[str, float]]:
        """The members of a queue or working set that are fire ids; the others named (the
        next claim sets them aside)."""
        found = []
        for raw, score in scored:
            fid = text(raw)
            if is_fire_id(fid):
                found.append((fid, score))
            else:
                unreadable.append(named(key, fid, "not a fire id"))
        return found

    def _in_flight(self, keys: Keys, working: Iterable[tuple[str, float]]) -> list[InFlight]:
        pairs = list(working)
        if not pairs:
            return []
        claims = self.redis.hmget(keys.claims, [f for f, _ in pairs])
        return [in_flight(f, s, opt_text(c)) for (f, s), c in zip(pairs, claims, strict=True)]

    # -- dead fires --------------------------------------------------------------
    def dead(self, job: str | None = None) -> Listing[DeadFire]:
        """Dead fires (of ``job`` only, if given), most recently dead first."""
        shards = self.core.shards_of(job)
        found: Listing[DeadFire] = Listing()
        for keys in shards:
            entries = self._fires(keys.dead, self._scored(keys.dead), found.unreadable)
            if job:
                entries = [(f, s) for f, s in entries if job_of(f) == job]
            if not entries:
                continue
            fids = [f for f, _ in entries]
            pipe = self.redis.pipeline(transaction=False)
            pipe.hmget(keys.attempts, fids)
            pipe.hmget(keys.payloads, fids)
            jobs = sorted({job_of(f) for f in fids})
            for name in jobs:
                pipe.lrange(keys.history(name), 0, -1)
            results: list[Any] = pipe.execute()
            tries, payloads, histories = results[0], results[1], results[2:]
            latest = self._latest_records(histories)
            for (fid, died), n, payload in zip(entries, tries, payloads, strict=True):
                name, due, _ = parse_fire(fid)
                try:
                    value = json.loads(payload) if payload else None
                except ValueError:
                    found.unreadable.append(named(keys.payloads, fid, "its payload is not JSON"))
                    value = None
                found.append(DeadFire(
                    fire=fid, job=name, kind=kind_of(fid), due_ms=due, died_ms=score_ms(died),
                    attempts=integer(n) or 0, payload=value, last=latest.get(fid)))
        found.sort(key=lambda d: d.died_ms, reverse=True)
        return found

    def _latest_records(self, histories: list[list[Any]]) -> dict[str, dict[str, Any]]:
        """Fire -> its newest record, over lists that are newest first."""
        latest: dict[str, dict[str, Any]] = {}
        for lines in histories:
            for record in records("", map(text, lines), []):
                latest.setdefault(str(record.get("fire", "")), record)
        return latest

    # -- the fleet -------------------------------------------------------------
    def status(self) -> Status:
        """Live planners and workers with their heartbeats, how Redis is set up and how full
        it is, which job file is published, and what the workers' files cannot run."""
        now = self.core.server_ms()
        keys = self.core.all_shards()[0]  # presence lives on the first shard
        pipe = self.redis.pipeline(transaction=False)
        pipe.zrange(keys.planners, 0, -1, withscores=True)
        pipe.hgetall(keys.planner_info)
        pipe.zrange(keys.workers, 0, -1, withscores=True)
        pipe.hgetall(keys.worker_info)
        pipe.hgetall(keys.generation)
        planners_raw, planner_info, workers_raw, worker_info, generation = pipe.execute()
        planners = []
        for pid, seen in planners_raw:
            info = planner_info.get(pid)
            tick = planner_tick_s(json_object(info))
            planners.append(member(text(pid), seen, info, now, planner_stale_ms(tick)))
        workers = [member(text(w), seen, worker_info.get(w), now, WORKER_STALE_MS)
                   for w, seen in workers_raw]
        gaps, unrunnable = definition_gaps(*self._definitions(workers))
        server = self._server_settings()
        newest = {text(k): text(v) for k, v in generation.items()} or None
        schedules = sum(int(self.redis.hlen(k.schedules)) for k in self.core.all_shards())
        notifications = pending(self.redis, keys, self.core.all_shards())
        warnings = _warnings(server, planners, workers, newest, gaps, unrunnable, now)
        aside = self.malformed(limit=1)
        if aside.total:
            warnings.append(f"{aside.total} entries of Redis were not what their key holds "
                            f"and were set aside, the newest: {aside.entries[0]} "
                            "(cronsvc malformed lists them)")
        pools = self.pool_views(now, workers)
        for p in pools:
            if not p.workers and (p.jobs or p.due) and any(w.alive for w in workers):
                warnings.append(f"pool {p.name}: no live worker serves it; {p.due} fire(s) "
                                f"due wait for one (cronsvc worker --pools {p.name})")
        if notifications["undelivered"]:
            warnings.append(f"{len(notifications['undelivered'])} notification(s) given up on: "
                            "see notifications below")
        return Status(now, server.version, server.aof, server.policy, planners, workers,
                      warnings, server.used_memory, server.maxmemory, newest, gaps, unrunnable,
                      schedules, notifications, pools, aside.total,
                      runs_memory(self.redis, self.core.all_shards(), self.core.published_jobs()))

    def malformed(self, limit: int = 100) -> Aside:
        """The entries set aside (cronsvc/malformed.py), newest first, of every shard: the
        first ``limit``, and how many there are."""
        pipe = self.redis.pipeline(transaction=False)
        for keys in self.core.all_shards():
            pipe.llen(keys.malformed)
            pipe.lrange(keys.malformed, 0, limit - 1)
        replies = pipe.execute()
        entries = [parse(raw) for lines in replies[1::2] for raw in lines]
        entries.sort(key=lambda e: e.at_ms, reverse=True)
        return Aside(sum(int(n) for n in replies[0::2]), entries[:limit])

    def _definitions(self, workers: list[Member]
                     ) -> tuple[dict[str, str], dict[str, dict[str, str]]]:
        """The published definition of every job, and the definitions each live worker
        holds (``Keys.held``: one hash per distinct job file, per shard)."""
        live = {w.id: str(w.info["held"]) for w in workers if w.alive and w.info.get("held")}
        digests = sorted(set(live.values()))
        published: dict[str, str] = {}
        held: dict[str, dict[str, str]] = {d: {} for d in digests}
        for keys in self.core.all_shards():
            pipe = self.redis.pipeline(transaction=False)
            pipe.hgetall(keys.jobs)
            for d in digests:
                pipe.hgetall(keys.held(d))
            lines, *files = pipe.execute()
            for job, line in lines.items():
                published[text(job)] = Policy.parse(text(line)).definition
            for d, found in zip(digests, files, strict=True):
                held[d].update({text(j): text(v) for j, v in found.items()})
        return published, {w: held[d] for w, d in live.items()}

    def _server_settings(self) -> ServerSettings:
        try:
            info = self.redis.info()
        except redis.ResponseError:  # e.g. an ACL user without INFO
            return ServerSettings()
        if info and all(isinstance(v, dict) for v in info.values()):
            info = next(iter(info.values()))  # a cluster client answers per node
        aof = info.get("aof_enabled")
        return ServerSettings(str(info.get("redis_version")),
                              None if aof is None else bool(int(aof)),
                              info.get("maxmemory_policy"), integer(info.get("used_memory")),
                              integer(info.get("maxmemory")))


@dataclass(frozen=True)
class ServerSettings:
    """What INFO says of the server (all None: INFO is not allowed to this user)."""

    version: str | None = None
    aof: bool | None = None
    policy: str | None = None
    used_memory: int | None = None
    maxmemory: int | None = None


RECENT_ERROR_MS = 600_000
#: Memory use past this share of maxmemory is warned of: writes fail with OOM at 100 %.
MEMORY_WARN = 0.9


def _warnings(server: ServerSettings, planners: list[Member], workers: list[Member],
              newest: dict[str, str] | None, gaps: dict[str, list[str]],
              unrunnable: list[str], now_ms: int) -> list[str]:
    version, aof, policy = server.version, server.aof, server.policy
    found = []
    if policy is not None and policy != "noeviction":
        found.append(f"maxmemory-policy is {policy}: Redis may evict cronsvc keys and lose "
                     "fires; set it to noeviction")
    if aof is False:
        found.append("AOF is off: a Redis crash loses the fires queued since the last "
                     "snapshot (appendonly yes)")
    if version is None:
        found.append("INFO is not allowed for this user: persistence and maxmemory-policy "
                     "not checked")
    if not any(p.alive for p in planners):
        found.append("no live planner: no new fires are being planned")
    if not any(w.alive for w in workers):
        found.append("no live worker: due fires are not being run")
    if server.maxmemory and server.used_memory is not None \
            and server.used_memory >= MEMORY_WARN * server.maxmemory:
        full = server.used_memory >= server.maxmemory
        found.append(f"Redis uses {server.used_memory:,} of {server.maxmemory:,} bytes "
                     f"(maxmemory){': writes fail with OOM' if full else ''}; planners and "
                     "workers wait until it has room again")
    for m in (*planners, *workers):
        err = m.info.get("last_error")
        ago = now_ms - int(err.get("at") or 0) if isinstance(err, dict) else None
        if m.alive and isinstance(err, dict) and ago is not None and ago <= RECENT_ERROR_MS:
            found.append(f"{m.id} saw a Redis error {ago // 1000}s ago: "
                         f"{err.get('code')} {err.get('message', '')}".rstrip())
    for m in (*planners, *workers):
        file = m.info.get("file")
        broken = file.get("broken") if isinstance(file, dict) else None
        if m.alive and isinstance(file, dict) and isinstance(broken, dict):
            since = broken.get("since")
            found.append(f"{m.id}'s job file {file.get('path')} is rejected since "
                         f"{iso_utc(since) if isinstance(since, int) else '?'}: "
                         f"{broken.get('problem')}; it runs its last good one")
    files = {p.info.get("digest") for p in planners if p.alive and p.info.get("digest")}
    if len(files) > 1 and newest:
        behind = sorted(p.id for p in planners if p.alive and p.info.get("digest")
                        and p.info.get("digest") != newest.get("digest"))
        found.append(f"planners hold {len(files)} different job files: {', '.join(behind)} "
                     f"yield to generation {newest.get('gen')} (from {newest.get('planner')})")
    for worker, gap in sorted(gaps.items()):
        found.append(f"worker {worker}'s job file differs from the published one: "
                     f"{'; '.join(gap)}")
    if unrunnable and any(w.alive for w in workers):
        found.append(f"no live worker can run {', '.join(unrunnable)}: their fires wait, and are "
                     f"recorded as missed after {UNHELD_MS // 60_000} minutes")
    return found


def _serving(workers: list[Member], *, live_only: bool = True) -> collections.Counter[str]:
    """How many (live) workers serve each pool, as they said."""
    return collections.Counter(pool for w in workers if w.alive or not live_only
                               for pool in w.info.get("pools") or [DEFAULT_POOL])


def with_output(record: dict[str, Any], outputs: dict[Any, Any]) -> dict[str, Any]:
    """``record`` with the whole output its run kept (stored by the attempt's start, while
    the output retention lasts), in place of the excerpt the record holds."""
    by_start = {text(k): text(v) for k, v in outputs.items()}
    kept = by_start.get(str(record.get("started")))
    return record if kept is None else {**record, "output": kept}
