"""Runtime schedules from Python: create, change, pause and delete them, and list them.

Each change is one Lua script (``lua/schedule-set-5.lua``, ``schedule-delete-5.lua``),
a compare-and-set on what this client read: the fires of the old definition that have
not started are unqueued, and the first fires of the new one are queued, in the same
step. If a planner or another client moved the schedule meanwhile, it reads again.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, cast

import redis

from cronsvc.errors import BadSchedule, CronsvcError, UnknownSchedule, Unreadable, did_you_mean
from cronsvc.fires import fire_id
from cronsvc.keys import Keys
from cronsvc.malformed import named
from cronsvc.presence import WAKE_WITHIN_MS
from cronsvc.schedule.expand import occurrences_ms
from cronsvc.schedule.runtime import (
    Outcome,
    RuntimeSchedule,
    build,
    parse_stored,
    plan_schedule,
    with_paused,
)
from cronsvc.store.replies import text
from cronsvc.store.scripts import Scripts, schedule_outcome

#: How far ahead an upsert queues the first fires itself (the planners take it from there).
HORIZON_MS = 2 * 3_600_000
#: Attempts of a compare-and-set that others keep moving before giving up.
ATTEMPTS = 20
#: Fires of a definition are due after it was written, less this: the time read before
#: the write, and the write itself, may be apart by this much at most.
DEFINITION_MARGIN_MS = 600_000
#: No mark lies further than this past the definition's write but a paused or finished
#: schedule's, whose queue holds nothing of it.
MAX_MARK_MS = 2 * 366 * 86_400_000


@dataclass(frozen=True)
class SchedulePage:
    """One page of :meth:`ScheduleOps.schedules`; pass ``cursor`` back for the next one
    (None: this was the last)."""

    schedules: list[RuntimeSchedule]
    cursor: str | None
    unreadable: list[str] = field(default_factory=list)  # entries that are no schedule


class ScheduleContext(Protocol):
    """What schedule operations take of the client's core
    (:class:`cronsvc.client.core.Core`)."""

    redis: redis.Redis
    scripts: Scripts
    shards: int
    actor: str  # who changes schedules when a call names nobody

    def keys(self, job: str) -> Keys: ...  # a schedule's fires: on the shard of its id
    def server_ms(self) -> int: ...
    def published_jobs(self) -> list[str]: ...
    def all_shards(self) -> list[Keys]: ...
    def pools_of(self, keys: Keys, jobs: Iterable[str]) -> dict[str, str]: ...
    def audited(self, action: str, target: str, note: str | None = None, *,
                by: str | None = None, **detail: Any) -> None: ...


class ScheduleOps:
    """The runtime schedules of :class:`cronsvc.Client`."""

    def __init__(self, core: ScheduleContext) -> None:
        self.core = core
        self.redis = core.redis
        self.scripts = core.scripts

    # -- changes ---------------------------------------------------------------------
    def upsert_schedule(self, id: str, *, job: str, **fields: Any) -> Outcome:
        """Create the schedule ``id`` or make it what is given: ``created``, ``changed`` or
        ``unchanged``. Fields: exactly one of ``cron`` or ``every`` (``'90m'``, seconds or
        a ``timedelta``), ``anchor``, ``timezone``, ``start``, ``end``, ``max_runs``,
        ``payload`` (JSON, at most 64 KiB), ``paused``, ``catch_up``,
        ``starting_deadline``, ``jitter``, ``overlap`` and ``actor``. BadSchedule names
        the field that is wrong; the job must be one the planners published."""
        return self.upsert_schedules([{"id": id, "job": job, **fields}])[0]

    def upsert_schedules(self, items: Iterable[Mapping[str, Any]]) -> list[Outcome]:
        """:meth:`upsert_schedule` for many at once, in a few round trips per shard: the
        outcome of each, in order. Every item is checked before anything changes."""
        now = self.core.server_ms()
        jobs = set(self.core.published_jobs())
        built = [self._build(dict(item), now, jobs) for item in items]
        seen: set[str] = set()
        for s in built:
            if s.id in seen:
                raise BadSchedule(f"schedule {s.id!r}: given twice in one batch")
            seen.add(s.id)
        groups = self._by_shard(built)
        if self.core.shards > 1:
            self._check_mirrored(groups)
        outcomes: dict[str, Outcome] = {}
        for keys, group in groups.items():
            done = self._set_all(keys, group, now)
            assert done is not None  # only an expected rev can fail to hold
            outcomes.update(done)
        changed = {o: sum(1 for v in outcomes.values() if v == o) for o in ("created", "changed")}
        if any(changed.values()):
            target = built[0].id if len(built) == 1 else f"{len(built)} schedules"
            by = {s.actor for s in built}  # the actor the call named, as the records say
            self.core.audited("schedule-set", target, None, job=built[0].job if len(built) == 1
                         else None, by=by.pop() if len(by) == 1 else None,
                         **{k: v for k, v in changed.items() if v})
        return [outcomes[s.id] for s in built]

    def delete_schedule(self, id: str) -> bool:
        """Delete the schedule and unqueue its fires that have not started (those in
        flight finish); False if there was none."""
        keys = self.core.keys(id)
        for _ in range(ATTEMPTS):
            old = self._read(keys, [id], set())[0][0]
            if old is None:
                return False
            pool = self.core.pools_of(keys, [old.job])[old.job]
            old, mark, lowest = self._read(keys, [id], {pool})[0]
            if old is None:
                return False
            result = self.scripts.schedule_delete(keys.with_pool(pool), id, old.rev, mark,
                                                  _old_fires(old, mark, lowest.get(pool)))
            if result == "deleted":
                self.core.audited("schedule-delete", id, None, job=old.job)
            if result != "retry":
                return result == "deleted"
        raise CronsvcError(f"schedule {id!r}: changed by others {ATTEMPTS} times; try again")

    def pause_schedule(self, id: str, *, actor: str | None = None) -> Outcome:
        """Stop the schedule's fires until :meth:`resume_schedule` (its queued fires go)."""
        return self._set_paused(id, True, actor)

    def resume_schedule(self, id: str, *, actor: str | None = None) -> Outcome:
        """Fire again from now on (fires due while it was paused do not run)."""
        return self._set_paused(id, False, actor)

    # -- reading ---------------------------------------------------------------------
    def get_schedule(self, id: str) -> RuntimeSchedule:
        """The schedule ``id``; UnknownSchedule if there is none."""
        keys = self.core.keys(id)
        raw = self.redis.hget(keys.schedules, id)
        if raw is None:
            raise UnknownSchedule(f"no schedule {id!r}")
        return _stored(keys, id, text(raw))

    def schedules(self, *, job: str | None = None, prefix: str | None = None,
                  cursor: str | None = None, limit: int = 100) -> SchedulePage:
        """A page of schedules (about ``limit``; of ``job`` and ids starting with
        ``prefix`` only, if given), read with HSCAN: never the whole set in one call."""
        if limit < 1:
            raise BadSchedule(f"limit {limit!r}: at least 1")
        shards = self.core.all_shards()
        shard, scan = _parse_cursor(cursor, len(shards))
        found: list[RuntimeSchedule] = []
        unreadable: list[str] = []
        pattern = _glob(prefix) + "*" if prefix else None
        while shard < len(shards) and len(found) < limit:
            scan, page = self.redis.hscan(shards[shard].schedules, scan, match=pattern,
                                          count=limit)
            for sid, raw in cast("dict[Any, Any]", page).items():
                try:
                    s = _stored(shards[shard], text(sid), text(raw))
                except Unreadable as exc:
                    unreadable.append(str(exc))
                    continue
                if job is None or s.job == job:
                    found.append(s)
            if scan == 0:
                shard, scan = shard + 1, 0
        more = shard < len(shards)
        return SchedulePage(sorted(found, key=lambda s: s.id),
                            f"{shard}:{scan}" if more else None, unreadable)

    def count_schedules(self, *, job: str | None = None) -> int:
        """How many schedules there are (of ``job``, if given)."""
        total = 0
        for keys in self.core.all_shards():
            if job is None:
                total += int(self.redis.hlen(keys.schedules))
            else:
                total += int(self.redis.hget(keys.schedule_counts, job) or 0)
        return total

    # -- inside ----------------------------------------------------------------------
    def _build(self, item: dict[str, Any], now: int, jobs: set[str]) -> RuntimeSchedule:
        sid, job = item.pop("id", None), item.pop("job", None)
        if not isinstance(job, str) or job not in jobs:
            hint = did_you_mean(job, jobs) if isinstance(job, str) else ""
            raise BadSchedule(f"schedule {sid!r}: job: unknown job {job!r}{hint} (a runtime "
                              "schedule runs a job the planners published from the job file)")
        item["actor"] = item.get("actor") or self.core.actor  # None too: nobody named
        try:
            return build(sid, job=job, now_ms=now, **item)  # type: ignore[arg-type]
        except TypeError as exc:
            raise BadSchedule(f"schedule {sid!r}: {exc}") from None

    def _set_paused(self, id: str, paused: bool, actor: str | None) -> Outcome:
        keys = self.core.keys(id)
        for _ in range(ATTEMPTS):
            now = self.core.server_ms()
            old, _, _ = self._read(keys, [id], set())[0]
            if old is None:
                raise UnknownSchedule(f"no schedule {id!r}")
            change = with_paused(old, paused, actor or self.core.actor, now)
            done = self._set_all(keys, [change], now, expect_rev=old.rev)
            if done is not None:
                if done[id] != "unchanged":
                    self.core.audited("schedule-pause" if paused else "schedule-resume", id,
                                      by=change.actor)
                return done[id]
        raise CronsvcError(f"schedule {id!r}: changed by others {ATTEMPTS} times; try again")

    def _set_all(self, keys: Keys, group: Sequence[RuntimeSchedule], now: int,
                 expect_rev: int | None = None) -> dict[str, Outcome] | None:
        """Set every schedule of one shard; None if ``expect_rev`` no longer holds."""
        outcomes: dict[str, Outcome] = {}
        pending = list(group)
        wake = False
        pools = self.core.pools_of(keys, {s.job for s in group})  # whose queue takes the fires
        for _ in range(ATTEMPTS):
            if not pending:
                break
            reads = self._read(keys, [s.id for s in pending], set(pools.values()))
            pipe = self.scripts.pipeline(keys)
            for s, (old, mark, lowest) in zip(pending, reads, strict=True):
                if expect_rev is not None and (old is None or old.rev != expect_rev):
                    return None
                pool = pools[s.job]
                # A changed schedule's old fires wait in the queue of its job's pool: the
                # same unless it now runs a job of another pool (the claim drops those).
                unqueue = _old_fires(old, mark, lowest.get(pool)) if old is not None else []
                dues, new_mark = plan_schedule(s, now, now + HORIZON_MS)
                wake = wake or bool(dues and dues[0] <= now + WAKE_WITHIN_MS)
                self.scripts.schedule_set(keys.with_pool(pool), s.id, old.rev if old else 0,
                                          mark, s.content, s.actor, new_mark, unqueue, dues,
                                          client=pipe)
            retry = []
            for s, res in zip(pending, pipe.execute(), strict=True):
                outcome, _ = schedule_outcome(res)
                if outcome == "retry":
                    retry.append(s)
                else:
                    outcomes[s.id] = outcome  # type: ignore[assignment]
            pending = retry
        if pending:
            raise CronsvcError(f"schedule {pending[0].id!r}: changed by others {ATTEMPTS} "
                               "times; try again")
        if wake:
            self.redis.publish(keys.wakeup, "schedule")
        return outcomes

    def _read(self, keys: Keys, ids: Sequence[str], pools: set[str]
              ) -> list[tuple[RuntimeSchedule | None, float | None, dict[str, float]]]:
        """Per id: the stored schedule, its mark; and the lowest score in the queue of each
        of ``pools`` (an empty queue left out)."""
        pipe = self.redis.pipeline(transaction=False)
        for sid in ids:
            pipe.hget(keys.schedules, sid)
            pipe.zscore(keys.schedule_marks, sid)
        order = sorted(pools)
        for pool in order:
            pipe.zrange(keys.with_pool(pool).queue, 0, 0, withscores=True)
        replies = pipe.execute()
        firsts = replies[len(replies) - len(order):]
        replies = replies[:len(replies) - len(order)]
        lowest = {pool: float(first[0][1]) for pool, first in zip(order, firsts, strict=True)
                  if first}
        out = []
        for i, sid in enumerate(ids):
            raw, mark = replies[2 * i], replies[2 * i + 1]
            out.append((_stored(keys, sid, text(raw)) if raw is not None else None,
                        float(mark) if mark is not None else None, lowest))
        return out

    def _check_mirrored(self, groups: Mapping[Keys, Sequence[RuntimeSchedule]]) -> None:
        """In a sharded fleet, a schedule's fires are claimed on the shard of its id, by the
        job's line the planners copy to every shard (``Keys.job_lines``): the job must be
        there, or its fires would be dropped as removed."""
        for keys, group in groups.items():
            there = {text(j) for j in self.redis.hkeys(keys.job_lines)}
            for s in group:
                if s.job not in there:
                    raise BadSchedule(
                        f"schedule {s.id!r}: job: {s.job!r} is not published on shard "
                        f"{keys.shard} yet (the planners copy every job to every shard at "
                        "their next tick); try again")

    def _by_shard(self, group: Sequence[RuntimeSchedule]) -> dict[Keys, list[RuntimeSchedule]]:
        out: dict[Keys, list[RuntimeSchedule]] = {}
        for s in group:
            out.setdefault(self.core.keys(s.id), []).append(s)
        return out


def _old_fires(old: RuntimeSchedule, mark: float | None, lowest: float | None) -> list[str]:
    """The fire ids of ``old`` that may be queued: due up to its mark, and not before the
    lowest score in the queue (nothing queued is older) nor before the definition was made
    (less a margin for the clock read before it was written). A paused schedule queues
    nothing."""
    if old.paused or mark is None or lowest is None or mark < lowest:
        return []
    after = max(int(lowest) - 1, old.updated_ms - DEFINITION_MARGIN_MS)
    dues = occurrences_ms(old.spec, after, int(min(mark, old.updated_ms + MAX_MARK_MS)))
    return [fire_id(old.job, due, schedule=old.id) for due in dues]


def _parse_cursor(cursor: str | None, shards: int) -> tuple[int, int]:
    if cursor is None:
        return 0, 0
    try:
        shard, scan = (int(part) for part in cursor.split(":"))
    except ValueError:
        raise BadSchedule(f"cursor {cursor!r}: not one this listing gave") from None
    if not 0 <= shard < shards or not 0 <= scan < 2**64:  # HSCAN's cursor is 64 bits
        raise BadSchedule(f"cursor {cursor!r}: not one this listing gave")
    return shard, scan


def _glob(text: str) -> str:
    """``text`` with the glob characters of HSCAN MATCH escaped."""
    return "".join("\\" + c if c in "*?[]\\" else c for c in text)


def _stored(keys: Keys, sid: str, line: str) -> RuntimeSchedule:
    """The schedule of a stored line; Unreadable naming it if the line is none (the
    planner sets such a line aside when it comes to plan it)."""
    try:
        return parse_stored(sid, line)
    except ValueError as exc:
        raise Unreadable(named(keys.schedules, sid, str(exc).split(": ", 1)[-1])) from None
