"""Runtime schedules from Python: create, change, pause and delete them, and list them.

Each change is one Lua script (``lua/schedule-set-5.lua``, ``schedule-delete-5.lua``),
a compare-and-set on what this client read: the fires of the old definition that have
not started are unqueued, and the first fires of the new one are queued, in the same
step. If a planner or another client moved the schedule meanwhile, it reads again.

The first fires queued are those due before the live planners have surely looked at the
runtime schedules again (:func:`cronsvc.presence.planners_look_within_ms`, from their
heartbeats); the schedule's mark says the planners take it from there, as they do for
every later fire. With no live planner, two hours of fires are queued.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import compress
from operator import attrgetter
from typing import Any, Protocol, cast

import redis

from cronsvc.client.core import pool_of_line
from cronsvc.errors import BadSchedule, CronsvcError, UnknownSchedule, Unreadable, did_you_mean
from cronsvc.fires import fire_id
from cronsvc.keys import Keys
from cronsvc.malformed import named
from cronsvc.presence import WAKE_WITHIN_MS, planner_tick_s, planners_look_within_ms
from cronsvc.schedule.expand import occurrences_ms
from cronsvc.schedule.runtime import (
    Outcome,
    RuntimeSchedule,
    build,
    line_head,
    parse_stored,
    with_paused,
)
from cronsvc.schedule.upserts import FirstFires, Row, Rows, Whens, collector_held, row_of
from cronsvc.store.replies import json_object, text
from cronsvc.store.scripts import NEW_OUTCOMES, UNREAD, NewRows, Scripts, SetRow

#: How far ahead an upsert queues the first fires itself while no planner is live, and
#: at most (with planners, up to their next look: the planners take it from there).
HORIZON_MS = 2 * 3_600_000
#: Schedules set per script call (several calls go in one pipeline), and read per command;
#: the first call of a batch is smaller, so Redis starts on it sooner.
PER_CALL = 250
FIRST_CALL = 50
PER_READ = 10_000
_ID, _JOB, _ACTOR, _CONTENT = (attrgetter(f) for f in ("id", "job", "actor", "content"))
#: What was read of a schedule before its change: its rev and mark, and the fires of its
#: definition to unqueue.
Read = tuple[int, float | None, Sequence[str]]
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
                by: str | None = None, at_ms: int | None = None, **detail: Any) -> None: ...


class ScheduleOps:
    """The runtime schedules of :class:`cronsvc.Client`."""

    def __init__(self, core: ScheduleContext) -> None:
        self.core = core
        self.redis = core.redis
        self.scripts = core.scripts
        # Kept: a client upserts batch after batch of the same few shapes.
        self.whens: Whens = {}
        self.first_fires = FirstFires(HORIZON_MS)
        # Whether a batch is sent without reading its schedules first: while most of the
        # last one sent so was new (a bulk load), where a read would find nothing.
        self.unread_first = True

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
        with collector_held():
            return self._upsert_all(list(items))

    def _upsert_all(self, items: list[Mapping[str, Any]]) -> list[Outcome]:
        named = {job for item in items if isinstance(job := item.get("job"), str)}
        now, jobs, until, pools = self._context(named)
        made = Rows(jobs, self.core.actor, lambda item: self._build(item, now, jobs),
                    self.whens, now, until)
        rows = made.rows(items)
        if len(set(map(_ID, rows))) < len(rows):
            seen: set[str] = set()
            for row in rows:
                if row.id in seen:
                    raise BadSchedule(f"schedule {row.id!r}: given twice in one batch")
                seen.add(row.id)
        groups = self._by_shard(rows)
        if self.core.shards > 1:
            self._check_mirrored(groups)
        outcomes: dict[str, Outcome] = {}
        at = [now]  # when the last change took effect
        for keys, group in groups.items():
            done = self._set_all(keys, group, now, until, pools[keys.shard], at=at)
            assert done is not None  # only an expected rev can fail to hold
            outcomes.update(done)
        counted = Counter(outcomes.values())
        changed = {o: counted[o] for o in ("created", "changed")}
        if any(changed.values()):
            target = rows[0].id if len(rows) == 1 else f"{len(rows)} schedules"
            by = set(map(_ACTOR, rows))  # the actor the call named, as the records say
            self.core.audited("schedule-set", target, None, job=rows[0].job if len(rows) == 1
                              else None, by=by.pop() if len(by) == 1 else None, at_ms=at[0],
                              **{k: v for k, v in changed.items() if v})
        return list(map(outcomes.__getitem__, map(_ID, rows)))

    def _context(self, named: set[str]
                 ) -> tuple[int, set[str], int, dict[int | None, dict[str, str]]]:
        """What a batch upsert reads first, in one round trip: the server clock, the
        published jobs, up to when the first fires are queued (:meth:`reach_ms`), and per
        shard the pool of each job ``named``."""
        shards = self.core.all_shards()
        names = sorted(named)
        clock = isinstance(self.redis, redis.Redis)  # a cluster's pipeline sends no TIME
        pipe = self.redis.pipeline(transaction=False)
        if clock:
            pipe.time()
        pipe.zrange(shards[0].planners, 0, -1, withscores=True)  # presence: the first shard
        pipe.hgetall(shards[0].planner_info)
        for keys in shards:
            pipe.hkeys(keys.jobs)
            if names:
                pipe.hmget(keys.job_lines, names)
        replies = pipe.execute()
        if clock:
            sec, usec = replies.pop(0)
            now = int(sec) * 1000 + int(usec) // 1000
        else:
            now = self.core.server_ms()
        seen, infos, *per_shard = replies
        step = 2 if names else 1
        jobs = {text(job) for part in per_shard[::step] for job in part}
        pools = {keys.shard: {name: pool_of_line(line) for name, line in zip(
            names, per_shard[i * step + 1] if names else (), strict=True)}
            for i, keys in enumerate(shards)}
        return now, jobs, self._reach(now, seen, infos), pools

    def delete_schedule(self, id: str) -> bool:
        """Delete the schedule and unqueue its fires that have not started (those in
        flight finish); False if there was none."""
        keys = self.core.keys(id)
        for _ in range(ATTEMPTS):
            old = self._old(keys, id)
            if old is None:
                return False
            pool = self.core.pools_of(keys, [old.job])[old.job]
            (raw,), (mark,), lowest = self._read(keys, [id], {pool})
            if raw is None:
                return False
            old = _stored(keys, id, raw)
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
            old = self._old(keys, id)
            if old is None:
                raise UnknownSchedule(f"no schedule {id!r}")
            change = with_paused(old, paused, actor or self.core.actor, now)
            done = self._set_all(keys, [row_of(change)], now, expect_rev=old.rev)
            if done is not None:
                if done[id] != "unchanged":
                    self.core.audited("schedule-pause" if paused else "schedule-resume", id,
                                      by=change.actor)
                return done[id]
        raise CronsvcError(f"schedule {id!r}: changed by others {ATTEMPTS} times; try again")

    def _old(self, keys: Keys, id: str) -> RuntimeSchedule | None:
        raw = self.redis.hget(keys.schedules, id)
        return None if raw is None else _stored(keys, id, text(raw))

    def reach_ms(self, now: int) -> int:
        """Up to when an upsert at ``now`` queues a schedule's fires: until every live
        planner has looked at the runtime schedules again (their heartbeats say when they
        were last seen and how often they tick); two hours while none is live."""
        keys = self.core.all_shards()[0]  # presence lives on the first shard
        pipe = self.redis.pipeline(transaction=False)
        pipe.zrange(keys.planners, 0, -1, withscores=True)
        pipe.hgetall(keys.planner_info)
        return self._reach(now, *pipe.execute())

    @staticmethod
    def _reach(now: int, seen: Sequence[tuple[Any, float]], infos: Mapping[Any, Any]) -> int:
        """:meth:`reach_ms` of the planners ``seen`` (id, at) and their ``infos``."""
        within = planners_look_within_ms(now, [
            (int(at), planner_tick_s(json_object(infos.get(pid)))) for pid, at in seen])
        return now + (HORIZON_MS if within is None else min(within, HORIZON_MS))

    def _set_all(self, keys: Keys, group: Sequence[Row], now: int, until: int | None = None,
                 pools: Mapping[str, str] | None = None, expect_rev: int | None = None,
                 at: list[int] | None = None) -> dict[str, Outcome] | None:
        """Set every schedule of one shard, queueing first fires up to ``until`` (read
        here if not given) in the queues of their jobs' ``pools`` (likewise); None if
        ``expect_rev`` no longer holds. ``at[0]`` becomes the script's clock when a
        change took effect."""
        outcomes: dict[str, Outcome] = {}
        if until is None:
            until = self.reach_ms(now)
        pending = list(group)
        wake = False
        if pools is None:  # whose queue takes them
            pools = self.core.pools_of(keys, {row.job for row in group})
        unread = expect_rev is None and self.unread_first
        for attempt in range(ATTEMPTS):
            if not pending:
                break
            todo: dict[str, list[Row]] = {}
            reads: dict[str, Read] = {}  # none: sent unread
            if unread:  # the script reads them: those that are there come back as retry
                if len(set(pools.values())) == 1:
                    todo[next(iter(pools.values()))] = pending
                else:
                    for row in pending:
                        todo.setdefault(pools[row.job], []).append(row)
            else:
                new = self._todo(keys, pending, pools, expect_rev, outcomes, todo, reads)
                if new is None:
                    return None
                if attempt == 0 and expect_rev is None:  # mostly new: the next goes unread
                    self.unread_first = 2 * new > len(pending)
            sent: list[tuple[list[Row], list[str], list[Row], bool]] = []
            replies = self.scripts.schedule_set_stream(
                keys, self._set_calls(keys, todo, reads, now, until, sent))
            retry = []
            created = 0
            for (new_sent, new_ids, rows_sent, soon), (letters, then, reply) in zip(
                    sent, replies, strict=True):
                wake = wake or soon
                if at is not None and then > at[0]:
                    at[0] = then
                made = letters.count("n")
                created += made
                if made == len(new_ids):  # all created (a bulk load)
                    outcomes.update(dict.fromkeys(new_ids, "created"))
                else:
                    for row, letter in zip(new_sent, letters, strict=True):
                        if letter == "r":
                            retry.append(row)
                        else:
                            outcomes[row.id] = NEW_OUTCOMES[letter]  # type: ignore[assignment]
                for row, (outcome, _) in zip(rows_sent, reply, strict=True):
                    if outcome == "retry":
                        retry.append(row)
                    else:
                        outcomes[row.id] = outcome  # type: ignore[assignment]
                        created += outcome == "created"
            if unread:  # kept while most are new
                self.unread_first, unread = 2 * created > len(pending), False
            pending = retry
        if pending:
            raise CronsvcError(f"schedule {pending[0].id!r}: changed by others {ATTEMPTS} "
                               "times; try again")
        if wake:
            self.redis.publish(keys.wakeup, "schedule")
        return outcomes

    def _todo(self, keys: Keys, pending: Sequence[Row], pools: Mapping[str, str],
              expect_rev: int | None, outcomes: dict[str, Outcome],
              todo: dict[str, list[Row]], reads: dict[str, Read]) -> int | None:
        """Read ``pending`` and add to ``todo`` the rows to send (per pool), to ``reads``
        what was read of each (rev and mark read, fires to unqueue); those found unchanged
        go to ``outcomes``. How many were not there; None if ``expect_rev`` no longer
        holds."""
        lines, marks, lowest = self._read(keys, [row.id for row in pending],
                                          set(pools.values()))
        # What can fail (a stored line that does not read) fails here, before any call of
        # this attempt (an unread one before it may have created the new ones of the batch).
        for row, raw, mark in zip(pending, lines, marks, strict=True):
            if expect_rev is not None and (raw is None or raw.split("|", 1)[0]
                                           != str(expect_rev)):
                return None
            rev, unqueue = 0, []
            if raw is not None:
                head = raw.split("|", 3)  # rev, times, actor, definition
                old = None if len(head) == 4 and "." in head[1] else _stored(
                    keys, row.id, raw)  # the form before: its definition re-encoded
                if expect_rev is None and (head[3] if old is None else old.content
                                           ) == row.content:
                    outcomes[row.id] = "unchanged"  # as it was read: nothing to send
                    continue
                old = old or _stored(keys, row.id, raw)
                # A changed schedule's old fires wait in the queue of its job's pool: the
                # same unless it now runs a job of another pool (the claim drops those).
                rev, unqueue = old.rev, _old_fires(old, mark, lowest.get(pools[row.job]))
            todo.setdefault(pools[row.job], []).append(row)
            reads[row.id] = (rev, mark, unqueue)
        return lines.count(None)

    def _set_calls(self, keys: Keys, todo: Mapping[str, list[Row]], reads: Mapping[str, Read],
                   now: int, until: int, sent: list[tuple[list[Row], list[str], list[Row], bool]]
                   ) -> Iterator[tuple[Keys, NewRows, list[SetRow]]]:
        """The script calls of schedule-set for ``todo`` (per pool: the rows; ``reads``: the
        rev and mark read of each row read first, and its fires to unqueue; the fires after
        ``now`` up to ``until`` queued), each made while the one before runs; ``sent`` gets
        each call's new rows (and their ids) and other rows in the order the reply gives
        them, and whether one of them fires soon. A row sent unread with nothing to queue
        yet, of the first row's actor, goes as a new one: its line as stored, written at
        ``now`` (a bulk load's rows, three arguments each)."""
        plan, quiet_marks = self.first_fires.plan, self.first_fires.quiet_marks
        heads: dict[str, str] = {}  # actor -> what a line created now by the actor starts with
        none: tuple[Any, ...] = ()
        dues: Sequence[int]
        unqueue: Sequence[str]
        for pool, rows in todo.items():
            for i, j in _calls(len(rows)):
                part: list[SetRow] = []
                others: list[Row] = []
                new: dict[str, tuple[list[str], list[int]]] = {}
                new_rows: dict[str, list[Row]] = {}
                soon = False
                chunk = rows[i:j]
                actor = chunk[0].actor
                head = heads.get(actor) or heads.setdefault(actor, line_head(1, now, now, actor))
                marks = quiet_marks(chunk, now, until)
                if not reads and len(set(map(_JOB, chunk))) == 1 and len(
                        set(map(_ACTOR, chunk))) == 1:
                    # a bulk load's call: the rows with nothing to queue go as they are,
                    # their arguments made list by list (the rest one by one below)
                    easy, quiet, hard = chunk, cast("list[int]", marks), []
                    if None in marks:
                        flags = [mark is not None for mark in marks]
                        easy = list(compress(chunk, flags))
                        quiet = [mark for mark in marks if mark is not None]
                        hard = [row for row, mark in zip(chunk, marks, strict=True)
                                if mark is None]
                    pairs: list[str] = [""] * (2 * len(easy))
                    pairs[::2] = map(_ID, easy)
                    pairs[1::2] = [head + c for c in map(_CONTENT, easy)]
                    if easy:  # a group holds one at least
                        new[chunk[0].job], new_rows[chunk[0].job] = (pairs, quiet), easy
                    chunk = hard
                    marks = [None] * len(chunk)
                for row, new_mark in zip(chunk, marks, strict=True):
                    if new_mark is None:
                        dues, new_mark = plan(row, now, until)
                    else:
                        dues = none
                    read = reads.get(row.id) if reads else None
                    if read is None and not dues and row.actor == actor:
                        group = new.get(row.job)
                        if group is None:
                            group = new[row.job] = ([], [])
                            new_rows[row.job] = []
                        group[0].extend((row.id, head + row.content))
                        group[1].append(new_mark)
                        new_rows[row.job].append(row)
                        continue
                    rev: int | str
                    rev, mark, unqueue = read or (UNREAD, None, none)
                    soon = soon or bool(dues and dues[0] <= now + WAKE_WITHIN_MS)
                    part.append((row.id, rev, mark, row.content, row.actor, new_mark, unqueue,
                                 dues))
                    others.append(row)
                sent.append((new_rows.popitem()[1] if len(new_rows) == 1 else
                             [row for group in new_rows.values() for row in group],
                             [sid for lines, _ in new.values() for sid in lines[::2]],
                             others, soon))
                yield keys.with_pool(pool), new, part

    def _read(self, keys: Keys, ids: Sequence[str], pools: set[str]
              ) -> tuple[list[str | None], list[float | None], dict[str, float]]:
        """The stored lines of ``ids`` and their marks; and the lowest score in the queue
        of each of ``pools`` (an empty queue left out). One round trip."""
        pipe = self.redis.pipeline(transaction=False)
        for i in range(0, len(ids), PER_READ):
            pipe.hmget(keys.schedules, ids[i:i + PER_READ])
            pipe.zmscore(keys.schedule_marks, list(ids[i:i + PER_READ]))
        order = sorted(pools)
        for pool in order:
            pipe.zrange(keys.with_pool(pool).queue, 0, 0, withscores=True)
        replies = pipe.execute()
        firsts = replies[len(replies) - len(order):]
        lowest = {pool: float(first[0][1]) for pool, first in zip(order, firsts, strict=True)
                  if first}
        lines: list[str | None] = []
        marks: list[float | None] = []
        for i in range(0, len(replies) - len(order), 2):
            lines += [None if raw is None else text(raw) for raw in replies[i]]
            marks += replies[i + 1]
        return lines, marks, lowest

    def _check_mirrored(self, groups: Mapping[Keys, Sequence[Row]]) -> None:
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

    def _by_shard(self, group: Sequence[Row]) -> dict[Keys, list[Row]]:
        if self.core.shards == 1:
            return {self.core.keys(group[0].id): list(group)} if group else {}
        out: dict[Keys, list[Row]] = {}
        for row in group:
            out.setdefault(self.core.keys(row.id), []).append(row)
        return out


def _calls(n: int) -> Iterator[tuple[int, int]]:
    """The slices of ``n`` rows a call each: :data:`FIRST_CALL`, then :data:`PER_CALL`."""
    i = 0
    while i < n:
        j = min(n, i + (FIRST_CALL if i == 0 else PER_CALL))
        yield i, j
        i = j


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
