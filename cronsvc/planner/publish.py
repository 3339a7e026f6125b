"""What a planner publishes to Redis: the job definitions of a job file.

The claim script decides from the published policy line alone (it cannot read
the YAML), so this module is the single place that turns a :class:`Job` into
that line and into the schedule spec the next planner compares against. Publishing
a file as a generation is here, apart from any planner: the planners' ticks and
``cronsvc publish`` (:meth:`cronsvc.Client.publish_config`) both call it.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field

import redis

from cronsvc.config.models import Config, Job
from cronsvc.errors import Superseded
from cronsvc.fires import fire_id
from cronsvc.keys import DEFAULT_POOL, Keys, all_shards, keys_for
from cronsvc.planner.generations import Newest
from cronsvc.policy import Policy, digest_of
from cronsvc.schedule.expand import Spec, occurrences_ms
from cronsvc.store.connection import RedisClock
from cronsvc.store.faults import REDIS_ERRORS, describe
from cronsvc.store.replies import texts
from cronsvc.store.scripts import Scripts

log = logging.getLogger("cronsvc.planner")

ABSENT = "-"  # expected digest of a job that is not published yet
MAX_FIRES_PER_CALL = 5000  # keeps one script call short: Redis serves nobody meanwhile


def policy_line(job: Job) -> str:
    """The job's published policy line (:mod:`cronsvc.policy`)."""
    return Policy.of(job).format()


def spec_json(job: Job) -> str:
    """The schedule-defining fields, enough to expand the job's fires again later."""
    return json.dumps(job.spec, separators=(",", ":"))


@dataclass
class Published:
    """What one shard holds about its jobs, read in one round trip."""

    lines: dict[str, str]
    specs: dict[str, str]
    watermarks: dict[str, str]
    lowest: dict[str, int]  # pool -> the lowest score of its queue (absent: empty)
    # Keys.job_lines of a sharded fleet (the lines of every job); None on one Redis
    mirror: dict[str, str] | None = None


@dataclass
class Changes:
    """Arguments of one shard's publish call."""

    sets: list[tuple[str, str, str, str]] = field(default_factory=list)  # job, old, line, spec
    removals: list[tuple[str, str]] = field(default_factory=list)  # job, old digest
    # (job, why, its queued fires of the old definition, the pool whose queue holds them):
    # why is removed or replaced
    unqueue: list[tuple[str, str, list[str], str]] = field(default_factory=list)
    mirror: list[tuple[str, str]] = field(default_factory=list)  # job, line (every job)
    unmirror: list[str] = field(default_factory=list)  # jobs no longer in the file

    def __bool__(self) -> bool:
        return bool(self.sets or self.removals or self.unqueue or self.mirror or self.unmirror)

    @property
    def fires(self) -> int:
        """Fires to unqueue."""
        return sum(len(fires) for _, _, fires, _ in self.unqueue)

    def chunks(self, size: int) -> Iterator[Changes]:
        """The changes as calls of at most ``size`` fires each; jobs all go in the first.

        Definitions and the first fires share one atomic call, so in the common
        case no worker can claim an old fire after its job changed.
        """
        part = Changes(self.sets, self.removals, mirror=self.mirror, unmirror=self.unmirror)
        room = size
        for job, why, fires, pool in self.unqueue:
            while fires:
                if room == 0:
                    yield part
                    part, room = Changes(), size
                head, fires = fires[:room], fires[room:]
                part.unqueue.append((job, why, head, pool))
                room -= len(head)
        yield part


def diff(wanted: Mapping[str, Job], have: Published, now_ms: int, horizon_ms: int,
         every: Mapping[str, Job] | None = None) -> Changes:
    """Publish calls that make ``have`` match ``wanted`` (the jobs of this shard), with the
    old fires to unqueue; and its mirror match ``every`` job of the file, if it has one."""
    out = Changes()
    if have.mirror is not None and every is not None:
        lines = {name: policy_line(job) for name, job in every.items()}
        out.mirror = [(n, line) for n, line in lines.items() if have.mirror.get(n) != line]
        out.unmirror = [n for n in have.mirror if n not in lines]
    for name, job in wanted.items():
        line = policy_line(job)
        old = have.lines.get(name)
        if old == line:
            continue
        old_digest = digest_of(old) if old else ABSENT
        out.sets.append((name, old_digest, line, spec_json(job)))
        if old and old_digest != job.digest:
            out.unqueue.append((name, "replaced", *old_fires(name, have, now_ms, horizon_ms)))
    for name, old in have.lines.items():
        if name not in wanted:
            out.removals.append((name, digest_of(old)))
            out.unqueue.append((name, "removed", *old_fires(name, have, now_ms, horizon_ms)))
    return out


def old_fires(name: str, have: Published, now_ms: int, horizon_ms: int
              ) -> tuple[list[str], str]:
    """Fire ids the old definition of ``name`` may have queued, and the pool whose queue
    holds them.

    Expanded from that queue's lowest score (nothing is queued before it) up to
    the old watermark, or to our own horizon if that is later: another planner
    may raise the watermark between our read and our publish.
    """
    pool = Policy.parse(have.lines[name]).pool if name in have.lines else DEFAULT_POOL
    return _old_fires(name, have, now_ms, horizon_ms, have.lowest.get(pool)), pool


def _old_fires(name: str, have: Published, now_ms: int, horizon_ms: int,
               lowest: int | None) -> list[str]:
    raw = have.specs.get(name)
    if lowest is None or raw is None:
        return []
    try:
        spec = Spec.from_published(name, json.loads(raw))
        upto = max(int(have.watermarks.get(name) or 0), now_ms + horizon_ms)
        if upto < lowest:
            return []
        # occurrences_ms is strictly after its start: step back one ms to keep the lowest.
        return [fire_id(name, due) for due in occurrences_ms(spec, lowest - 1, upto)]
    except Exception as exc:  # a spec an older version wrote must not stop publishing
        log.warning("job %s: cannot expand its old schedule %s (%s); its queued fires stay",
                    name, raw, exc)
        return []


# -- publishing a generation ---------------------------------------------------------------
def by_shard(config: Config) -> dict[Keys, list[Job]]:
    """The jobs of ``config`` on each shard (every shard, one without jobs too)."""
    groups: dict[Keys, list[Job]] = {k: [] for k in all_shards(config.redis.shards,
                                                               config.redis.prefix)}
    for job in config.jobs.values():
        keys = keys_for(job.name, config.redis.shards, config.redis.prefix)
        groups.setdefault(keys, []).append(job)
    return groups


def publish_file(client: redis.Redis, scripts: Scripts, config: Config, *, planner_id: str
                 ) -> int | None:
    """Publish ``config`` now as the newest generation, even when planners hold a newer
    file (``cronsvc publish``: a rollback on purpose); the generation it is now, or None
    when another file was published meanwhile."""
    first = all_shards(config.redis.shards, config.redis.prefix)[0]
    newest = Newest.of(texts(client.hgetall(first.generation)))
    # Forced: a new generation unless it is the newest already, whoever holds the newest
    # (what generations.decide says of a file that changed).
    generation = newest.gen if newest.digest == config.digest else claim_generation(
        scripts, config, planner_id, newest)
    if generation is None:
        return None
    try:
        sync_jobs(client, scripts, config, generation, now_ms=RedisClock(client).now_ms(),
                  horizon_ms=int(config.planner.horizon * 1000))
    except Superseded:
        return None
    return generation


def claim_generation(scripts: Scripts, config: Config, planner_id: str, newest: Newest, *,
                     script_now: int | None = None) -> int | None:
    """Make ``config`` the generation after ``newest``: its number, or None when another
    file was published meanwhile (the caller decides again)."""
    first = all_shards(config.redis.shards, config.redis.prefix)[0]
    gen, status = scripts.generation(first, config.digest, planner_id, newest.gen,
                                     len(config.jobs), now_ms=script_now)
    if status < 0:
        log.warning("another job file was published meanwhile (generation %d); "
                    "deciding again at the next tick", gen)
        return None
    log.info("publishing %s as generation %d (%d jobs)", config.source, gen, len(config.jobs))
    return gen


def sync_jobs(client: redis.Redis, scripts: Scripts, config: Config, generation: int, *,
              now_ms: int, horizon_ms: int, script_now: int | None = None,
              noted: Callable[[BaseException], None] | None = None) -> bool:
    """Publish the new, changed and removed jobs of ``config`` as ``generation``, and
    unqueue the fires of old definitions (each recorded in its job's history); True if a
    shard needs another try.

    A job another publisher of the same generation changed since it was read is a
    conflict: logged, for another try. So is a shard that cannot be reached (``noted``
    hears of its error): one shard down must not stop the others. A newer generation on a
    shard stops the publish there: Superseded.
    """
    retry = False
    for keys, jobs in by_shard(config).items():
        try:
            retry |= _sync_shard(client, scripts, config, keys, jobs, generation,
                                 now_ms=now_ms, horizon_ms=horizon_ms, script_now=script_now)
        except Superseded as exc:
            log.warning("shard %s holds a newer job file (%s); deciding again at the "
                        "next tick", keys.shard, exc)
            raise
        except REDIS_ERRORS as exc:
            retry = True
            if noted is not None:
                noted(exc)
            log.warning("cannot publish to shard %s, trying again at the next tick: %s",
                        keys.shard, describe(exc))
    return retry


def _sync_shard(client: redis.Redis, scripts: Scripts, config: Config, keys: Keys,
                jobs: list[Job], generation: int, *, now_ms: int, horizon_ms: int,
                script_now: int | None) -> bool:
    """Publish one shard's jobs; True if a conflict needs another try."""
    pipe = client.pipeline(transaction=False)
    pipe.hgetall(keys.jobs)
    pipe.hgetall(keys.specs)
    pipe.hgetall(keys.watermarks)
    pipe.get(keys.published)
    sharded = keys.job_lines != keys.jobs
    if sharded:
        pipe.hgetall(keys.job_lines)
    lines, specs, marks, published, *mirror = pipe.execute()
    have = Published(texts(lines), texts(specs), texts(marks),
                     _lowest(client, keys, texts(lines).values()),
                     texts(mirror[0]) if sharded else None)
    changes = diff({j.name: j for j in jobs}, have, now_ms, horizon_ms, config.jobs)
    if not changes and published is not None and int(published) == generation:
        return False
    changed = 0
    retry = False
    for part in changes.chunks(MAX_FIRES_PER_CALL):
        result = scripts.publish(keys, part.sets, part.removals, part.unqueue,
                                 generation=generation, history_cap=config.worker.history,
                                 now_ms=script_now, mirror=part.mirror, unmirror=part.unmirror)
        changed += result.changed
        for job in result.conflicts:
            retry = True
            log.warning("job %s was changed by another planner meanwhile; "
                        "publishing again at the next tick", job)
    if changes.sets or changes.removals or changes.unqueue:
        log.info("published %d job(s), removed %d, unqueued %d old fire(s)",
                 len(changes.sets), len(changes.removals), changes.fires)
    if changed:
        client.publish(keys.wakeup, "publish")
    return retry


def _lowest(client: redis.Redis, keys: Keys, lines: Iterable[str]) -> dict[str, int]:
    """The lowest score of the queue of each pool the shard's jobs name (a pool whose
    queue is empty is left out)."""
    pools = sorted({DEFAULT_POOL, *(Policy.parse(line).pool for line in lines)})
    pipe = client.pipeline(transaction=False)
    for pool in pools:
        pipe.zrange(keys.with_pool(pool).queue, 0, 0, withscores=True)
    return {pool: int(first[0][1]) for pool, first in zip(pools, pipe.execute(), strict=True)
            if first}
