"""What :class:`cronsvc.Client` returns: plain dataclasses, built from what Redis holds.

Times are ms since the epoch on the Redis server's clock (UTC); every view that
needs "now" carries the ``now_ms`` it was read at, so renderings agree with it.
``dataclasses.asdict`` of any of them is JSON-ready (``cronsvc ... --json``).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from cronsvc.client.costs import KeysCost
from cronsvc.fires import kind_of, parse_fire
from cronsvc.keys import DEFAULT_POOL
from cronsvc.malformed import SetAside, named
from cronsvc.policy import Policy
from cronsvc.presence import alive
from cronsvc.schedule.expand import Spec, next_fires
from cronsvc.schedule.words import describe_schedule, schedule_text
from cronsvc.store.replies import integer, text, texts

# A schedule with no fire in this many years shows no next fire (Feb 29 comes every 4).
# History records read per job to find its last run among skips.
LAST_RUN_SCAN = 20
_INT64_MAX = 2**63 - 1
T = TypeVar("T")


class Listing(list[T]):
    """What a listing could read, in order, and what it could not (:attr:`unreadable`,
    one line each naming the key and the entry): data written into Redis by hand is left
    out, and said so, never the end of the listing."""

    def __init__(self, items: Iterable[T] = (), unreadable: Iterable[str] = ()) -> None:
        super().__init__(items)
        self.unreadable = list(unreadable)


def records(key: str, lines: Iterable[Any], unreadable: list[str]) -> list[dict[str, Any]]:
    """The history records among raw ``lines`` of ``key`` (JSON objects with a status);
    each line that is not one is named in ``unreadable``."""
    found = []
    for raw in lines:
        record = _record(raw)
        if isinstance(record.get("status"), str):
            found.append(record)
        else:
            unreadable.append(named(key, raw if isinstance(raw, str) else str(raw),
                                    "not a history record"))
    return found


@dataclass(frozen=True)
class JobInfo:
    """One published job as the fleet sees it (``cronsvc ls``)."""

    name: str
    cron: str  # the schedule as the file writes it: cron, `every 90m`, or "" (triggered only)
    description: str  # the schedule in plain words
    timezone: str
    jitter: float
    catch_up: str
    overlap: str  # with its bounds: ``queue, max 3, limit db 2``
    max_attempts: int
    pool: str
    then: str  # the jobs its fires' ends trigger: ``s=import;f=alert``
    paused: bool  # at run time (cronsvc pause) or in the job file
    pause_note: str | None
    paused_since_ms: int | None
    paused_in_file: bool
    next_fire_ms: int | None
    last_run: dict[str, Any] | None  # newest history record of a run, else newest record
    # A fire not started this long after its time is missed (0: never); catch_up none
    # without a starting_deadline gets policy.NONE_DEADLINE_S.
    starting_deadline_ms: int = 0
    # Statuses of its newest history records (at most LAST_RUN_SCAN), newest first.
    recent: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class InFlight:
    """A fire held by a worker: started, or about to start."""

    fire: str
    job: str
    due_ms: int
    lease_until_ms: int
    worker: str | None
    attempt: int | None
    claimed_at_ms: int | None


@dataclass(frozen=True)
class Pause:
    """What ``pause`` did: since when the job is paused, and its runs claimed before."""

    job: str
    since_ms: int
    note: str
    in_flight: list[InFlight]
    waited: bool = False  # True: the command returned only after those runs ended


@dataclass(frozen=True)
class Resumed:
    """What ``resume`` did. True when the job was paused at run time."""

    job: str
    was_paused: bool
    requeued: list[str] = field(default_factory=list)  # fires of the pause queued again
    catch_up: str = ""  # the job's policy that chose them
    truncated: bool = False  # older missed fires were left out (MAX_CATCH_UP)
    paused_in_file: bool = False  # still paused: the job file says so

    def __bool__(self) -> bool:
        return self.was_paused


@dataclass(frozen=True)
class QueuedFire:
    """A fire waiting in the queue."""

    fire: str
    job: str
    kind: str  # cron, trigger or at
    due_ms: int  # the fire's own time (from its id)
    at_ms: int  # when it may start: its due time, or the time of its next retry
    attempts: int  # attempts used already (a retry waiting)
    pool: str = DEFAULT_POOL  # whose workers run it
    served: bool = True  # some live worker serves that pool


@dataclass(frozen=True)
class PoolView:
    """One worker pool: its published jobs, the live workers serving it, and its due fires."""

    name: str
    jobs: int
    workers: int
    due: int
    oldest_due_ms: int | None


@dataclass(frozen=True)
class QueueView:
    """The queue of every shard at ``now_ms``: due fires, planned ones, fires in flight."""

    now_ms: int
    due_count: int
    ahead_count: int
    oldest_due_ms: int | None  # when the oldest due fire became due
    due: list[QueuedFire]
    ahead: list[QueuedFire]
    in_flight: list[InFlight]
    unreadable: list[str] = field(default_factory=list)  # members that are no fire id

    @property
    def lateness_ms(self) -> int:
        """How long the oldest due fire has waited (0 when none is due)."""
        return 0 if self.oldest_due_ms is None else max(self.now_ms - self.oldest_due_ms, 0)


@dataclass(frozen=True)
class Aside:
    """Entries of Redis set aside (``cronsvc malformed``): how many are kept, the newest."""

    total: int
    entries: list[SetAside]


@dataclass(frozen=True)
class FireView:
    """One fire: where it is now, and every attempt its job's history still holds."""

    fire: str
    job: str
    kind: str
    due_ms: int
    state: str  # queued, running, dead, done or unknown
    attempts: list[dict[str, Any]]  # history records of the fire, first attempt first
    worker: str | None = None  # while running: who holds it
    lease_until_ms: int | None = None


@dataclass(frozen=True)
class LiveChunk:
    """A piece of a fire's output written while its run went (``cronsvc show --follow``):
    ``id`` to read on after, the ``attempt`` it is of, its ``text``, or ``end`` once that
    run is over."""

    id: str
    attempt: int
    text: str = ""
    end: bool = False


def live_chunks(entries: Iterable[Any]) -> list[LiveChunk]:
    """The chunks of a fire's live stream (XRANGE entries); an entry that is not one is
    left out (the stream is a view: its stored output is what the fire kept)."""
    found = []
    for entry_id, fields in entries:
        values = texts(fields)
        attempt = integer(values.get("attempt"))
        if attempt is not None:
            found.append(LiveChunk(text(entry_id), attempt, values.get("text", ""),
                                   "end" in values))
    return found


@dataclass(frozen=True)
class JobQueue:
    """The queue of one job (``cronsvc queue --by-job``)."""

    job: str
    due: int
    ahead: int
    in_flight: int
    dead: int
    oldest_due_ms: int | None


@dataclass(frozen=True)
class DeadFire:
    """A fire out of attempts; ``last`` is its newest history record, if still kept."""

    fire: str
    job: str
    kind: str
    due_ms: int
    died_ms: int
    attempts: int
    payload: Any
    last: dict[str, Any] | None


@dataclass(frozen=True)
class Member:
    """A live planner or worker, from its heartbeat."""

    id: str
    last_seen_ms: int
    alive: bool  # heartbeat recent enough
    info: dict[str, Any]


@dataclass(frozen=True)
class Status:
    """The fleet and its Redis (``cronsvc status``)."""

    now_ms: int
    redis_version: str | None  # None: INFO is not allowed to this user
    aof: bool | None
    maxmemory_policy: str | None
    planners: list[Member]
    workers: list[Member]
    warnings: list[str]
    used_memory: int | None = None  # bytes (INFO memory)
    maxmemory: int | None = None  # bytes, 0: no limit
    generation: dict[str, Any] | None = None  # the newest published job file (Keys.generation)
    # worker -> how its job file differs from the published one (live workers only)
    worker_gaps: dict[str, list[str]] = field(default_factory=dict)
    unrunnable: list[str] = field(default_factory=list)  # published jobs no live worker holds
    schedules: int = 0  # runtime schedules
    # what waits to be told: outbox entries, messages queued, and those given up on
    notifications: dict[str, Any] = field(default_factory=dict)
    pools: list[PoolView] = field(default_factory=list)
    malformed: int = 0  # entries set aside (cronsvc/malformed.py), on every shard
    # what history, outputs and live output take (cronsvc/client/costs.py; None: not allowed)
    runs: dict[str, KeysCost] | None = None


def definition_gaps(published: Mapping[str, str], held: Mapping[str, Mapping[str, str]]
                    ) -> tuple[dict[str, list[str]], list[str]]:
    """Which workers cannot run which published jobs, and which jobs no worker can run.

    ``published``: job -> the definition digest the planners published (``Policy``);
    ``held``: worker -> job -> the definition digest its file has. A worker lacking a
    job, or holding another definition of it, leaves that job's fires to the others.
    """
    gaps: dict[str, list[str]] = {}
    if not held:  # no live worker says what it holds: nothing to compare
        return gaps, []
    for worker, mine in held.items():
        lacks = sorted(j for j in published if j not in mine)
        other = sorted(j for j in published if j in mine and published[j]
                       and mine[j] != published[j])
        found = ([f"lacks {', '.join(lacks)}"] if lacks else []) + (
            [f"another definition of {', '.join(other)}"] if other else [])
        if found:
            gaps[worker] = found
    unrunnable = sorted(j for j, d in published.items()
                        if not any(j in mine and (not d or mine[j] == d)
                                   for mine in held.values()))
    return gaps, unrunnable


def spec_of(job: str, spec_json: str) -> Spec:
    """The published schedule of ``job`` (``Keys.specs``) as a :class:`Spec`; ValueError if
    it is not one."""
    value = json.loads(spec_json)
    if not isinstance(value, dict):
        raise ValueError(f"a JSON {type(value).__name__}, not a published schedule")
    try:
        return Spec.from_published(job, value)
    except (TypeError, KeyError, AttributeError) as exc:
        raise ValueError(f"not a published schedule: {exc}") from None


def newest_first(lists: list[list[str]], count: int) -> list[str]:
    """The newest ``count`` of one job's history lines kept in several lists (each newest
    first): a sharded fleet records a runtime schedule's runs on the schedule's shard."""
    if len(lists) == 1:
        return lists[0][:count]

    def when(raw: str) -> int:
        r = _record(raw)
        return integer(r.get("started") or r.get("at") or r.get("scheduled")) or 0

    merged = sorted((raw for one in lists for raw in one), key=when, reverse=True)
    return merged[:count]


def last_run(history: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The newest record of a run (it has a start) among ``history`` (newest first), else
    the newest record: a job skipped for a while shows why."""
    return next((r for r in history if r.get("started") is not None),
                history[0] if history else None)


def bounds(policy: Policy) -> str:
    """How many runs of a job may run at once: ``allow``, ``queue, max 3, limit db 2``."""
    parts = [policy.overlap]
    if policy.max_concurrent:
        parts.append(f"max {policy.max_concurrent}")
    parts += [f"limit {limit.replace(':', ' ')}" for limit in policy.limits.split(",") if limit]
    return ", ".join(parts)


def job_info(name: str, line: str, spec_json: str | None, pause_json: str | None,
             history: list[dict[str, Any]], now_ms: int) -> JobInfo:
    """A job from its policy line, spec, pause and newest history records."""
    policy = Policy.parse(line)
    # publish writes the spec with the policy line; a spec missing shows an empty schedule
    spec = spec_of(name, spec_json) if spec_json else None
    pause = _record(pause_json) if pause_json else None
    upcoming = next_fires(spec, now_ms, 1) if spec else []
    return JobInfo(
        name=name, cron=schedule_text(spec) if spec else "",
        timezone=spec.timezone if spec else "UTC",
        description=describe_schedule(spec) if spec else "", jitter=spec.jitter if spec else 0.0,
        catch_up=policy.catch_up, overlap=bounds(policy),
        max_attempts=policy.max_attempts, pool=policy.pool, then=policy.then,
        paused=pause is not None or policy.paused_in_file,
        pause_note=(pause.get("note") or None) if pause else None,
        paused_since_ms=integer(pause.get("since")) if pause else None,
        paused_in_file=policy.paused_in_file, next_fire_ms=upcoming[0] if upcoming else None,
        last_run=last_run(history), starting_deadline_ms=policy.deadline_ms,
        recent=[str(r.get("status") or "") for r in history[:LAST_RUN_SCAN]],
    )


def in_flight(fid: str, lease_until_ms: float, claim_json: str | None) -> InFlight:
    """A fire of ``scheduler:working`` with what its claim says (worker, attempt)."""
    job, due, _ = parse_fire(fid)
    claim = _record(claim_json) if claim_json else {}
    return InFlight(fire=fid, job=job, due_ms=due, lease_until_ms=score_ms(lease_until_ms),
                    worker=claim.get("worker"), attempt=integer(claim.get("token")),
                    claimed_at_ms=integer(claim.get("claimed_at")))


def queued(fid: str, score: float, attempts: str | None, pool: str = DEFAULT_POOL,
           served: bool = True) -> QueuedFire:
    job, due, _ = parse_fire(fid)
    return QueuedFire(fire=fid, job=job, kind=kind_of(fid), due_ms=due, at_ms=score_ms(score),
                      attempts=integer(attempts) or 0, pool=pool, served=served)


def member(mid: str, seen: float, info_json: str | None, now_ms: int,
           stale_ms: int) -> Member:
    info = _record(info_json) if info_json else {}
    seen_ms = score_ms(seen)
    return Member(id=mid, last_seen_ms=seen_ms, alive=alive(seen_ms, now_ms, stale_ms),
                  info=info)


def _record(text: str | bytes) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except (TypeError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def score_ms(score: float) -> int:
    """A sorted-set score as ms; ``inf`` (ZADD takes it) as the largest int64 Redis
    could hold, so a hand-written member shows instead of breaking the listing."""
    if math.isfinite(score):
        return int(score)
    return _INT64_MAX if score > 0 else -_INT64_MAX

