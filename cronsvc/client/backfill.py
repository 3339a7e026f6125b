"""Backfill: run again the fires of a past range that did not run (an outage, a pause).

A backfill takes the fires of a job's schedule (or of a runtime schedule) due in a range,
under their own fire ids, and queues each that is neither queued, in flight, dead nor in
the record of runs (:mod:`cronsvc.ran`, 35 days back). The fires are queued with attempts
0, so the claim runs them however late they are, and a fire whose bounds (overlap,
max_concurrent, limits) are full waits for its slot. The caller feeds them in due order,
``max_concurrent`` at a time, and waits until the last one ended: a backfill stopped half
way and started again goes on where it stopped, and one run twice runs nothing twice.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, Protocol

import redis

from cronsvc.client.views import spec_of
from cronsvc.clock import dt_to_ms, iso_utc, ms_to_dt
from cronsvc.errors import (
    BadArgument,
    BadTime,
    CronsvcError,
    ScheduleError,
    UnknownJob,
    UnknownSchedule,
)
from cronsvc.fires import fire_id, parse_fire
from cronsvc.history import record
from cronsvc.keys import EACH_HOST, Keys
from cronsvc.policy import Policy
from cronsvc.ran import REACH_MS
from cronsvc.schedule.expand import Spec, occurrences_ms
from cronsvc.schedule.runtime import RuntimeSchedule
from cronsvc.schedule.when import parse_past
from cronsvc.store.replies import text
from cronsvc.store.scripts import Scripts

__all__ = ["MAX_BACKFILL", "Backfill", "BackfillContext", "BackfillFire", "BackfillOps"]

#: Fires one backfill may take at most: a wider range is a mistake more often than not.
MAX_BACKFILL = 10_000

Progress = Callable[["BackfillFire"], None]
Instant = int | datetime | str


@dataclass(frozen=True)
class BackfillFire:
    fire: str
    due_ms: int
    #: Before: ``to run``, ``queued already``, ``in flight``, ``dead`` or ``ran``. After the
    #: backfill ran it: ``ran`` or ``dead`` for the fires it queued, ``not run`` for one the
    #: claim dropped (its job was paused or removed meanwhile).
    state: str
    #: True for the fires this backfill queued.
    queued: bool = False


@dataclass(frozen=True)
class Backfill:
    target: str
    job: str
    schedule: str | None
    from_ms: int
    to_ms: int
    max_concurrent: int
    dry_run: bool
    timezone: str  # the schedule's
    fires: list[BackfillFire] = field(default_factory=list)

    def count(self, state: str) -> int:
        return sum(1 for f in self.fires if f.state == state)

    @property
    def to_run(self) -> list[BackfillFire]:
        """The fires it queues (a dry run), or queued (a run)."""
        return [f for f in self.fires if f.queued or f.state == "to run"]


@dataclass(frozen=True)
class _Target:
    job: str
    schedule: str | None
    owner: str  # whose record of runs: the job, or '!' + schedule id
    keys: Keys  # the shard and pool of its fires
    spec: Spec


class BackfillContext(Protocol):
    """What a backfill takes of the client's core (:class:`cronsvc.client.core.Core`)."""

    redis: redis.Redis
    scripts: Scripts
    actor: str

    def server_ms(self) -> int: ...
    def keys(self, job: str) -> Keys: ...
    def unknown_job(self, job: str, extra: str = "") -> UnknownJob: ...
    def audited(self, action: str, target: str, note: str | None = None,
                **detail: Any) -> None: ...


class BackfillOps:
    """``Client.backfill``: the core, and how to read a runtime schedule (a backfill's
    target may be one)."""

    def __init__(self, core: BackfillContext,
                 get_schedule: Callable[[str], RuntimeSchedule]) -> None:
        self.core = core
        self.redis = core.redis
        self.scripts = core.scripts
        self.get_schedule = get_schedule

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
        if max_concurrent < 1:
            raise BadArgument(f"max_concurrent {max_concurrent}: at least 1")
        t = self._backfill_target(target)
        now = self.core.server_ms()
        zone = tz or t.spec.timezone
        from_ms, to_ms = _ms(start, "start", now, zone), min(_ms(end, "end", now, zone), now)
        if from_ms > to_ms:
            raise BadTime(f"backfill {target}: the range from {iso_utc(from_ms)} to "
                          f"{iso_utc(to_ms)} is empty (its end is capped at now)")
        if from_ms < now - REACH_MS:
            raise BadTime(f"backfill {target}: {iso_utc(from_ms)} is more than "
                          f"{REACH_MS // 86_400_000} days ago: runs are recorded that far back "
                          f"only (start at {iso_utc(now - REACH_MS)} or later)")
        dues = occurrences_ms(t.spec, from_ms - 1, to_ms)
        if len(dues) > MAX_BACKFILL:
            raise BadArgument(f"backfill {target}: {len(dues)} fires from {iso_utc(from_ms)} "
                              f"to {iso_utc(to_ms)}; at most {MAX_BACKFILL} at once: narrow "
                              "the range")
        fires = [fire_id(t.job, d, schedule=t.schedule) for d in dues]
        states = self.scripts.backfill(t.keys, t.owner, t.job, fires, queue=False)
        plan = Backfill(target, t.job, t.schedule, from_ms, to_ms, max_concurrent, dry_run,
                        t.spec.timezone, [BackfillFire(f, d, s) for f, d, s
                                          in zip(fires, dues, states, strict=True)])
        if planned is not None:
            planned(plan)
        if dry_run or not plan.to_run:
            return plan
        todo = plan.to_run
        line = record(todo[0].fire, "backfill", job=t.job, reason=(
            f"{self.core.actor}: {len(todo)} of {len(fires)}, {_minutes(from_ms)}.."
            f"{_minutes(to_ms)}"))
        self.core.audited("backfill", target, note, range=f"{iso_utc(from_ms)}/{iso_utc(to_ms)}",
                     fires=len(todo))
        ended = self._feed(t, [f.fire for f in todo], line, max_concurrent, progress, poll)
        after = {f.fire: f for f in ended}
        return replace(plan, fires=[after.get(f.fire, f) for f in plan.fires])

    def _backfill_target(self, target: str) -> _Target:
        """The job of that name, else the runtime schedule of that id."""
        try:
            keys, spec, paused = self._published(target)
        except UnknownJob as unknown:
            try:
                schedule = self.get_schedule(target)
            except UnknownSchedule:
                raise UnknownJob(f"{unknown} (nor a runtime schedule of that id)") from None
            if schedule.paused:
                raise CronsvcError(f"schedule {target} is paused: resume it first (a "
                                   "backfilled fire of a paused schedule would only be "
                                   "skipped)") from None
            keys, _, paused = self._published(schedule.job)
            _refuse_paused(schedule.job, paused)
            # Its fires live on the shard of its id, in the queue of its job's pool.
            return _Target(schedule.job, target, "!" + target,
                           self.core.keys(target).with_pool(keys.pool), schedule.spec)
        _refuse_paused(target, paused)
        if keys.pool == EACH_HOST:
            raise BadArgument(f"backfill {target}: a job with pool: each-host cannot be "
                              "backfilled (which hosts ran a past fire is not recorded)")
        if spec is None or (spec.cron is None and spec.every_ms is None):
            raise BadArgument(f"backfill {target}: the job has no schedule (it runs when "
                              "triggered): nothing to backfill")
        return _Target(target, None, target, keys, spec)

    def _published(self, job: str) -> tuple[Keys, Spec | None, bool]:
        """A published job's keys (with its pool's queue), schedule, and whether it is
        paused (at run time or in its file), in one round trip; UnknownJob if there is none."""
        keys = self.core.keys(job)
        pipe = self.redis.pipeline(transaction=False)
        for key in (keys.jobs, keys.specs, keys.paused):
            pipe.hget(key, job)
        line, spec, pause = pipe.execute()
        if line is None:
            raise self.core.unknown_job(job)
        policy = Policy.parse(text(line))
        return (keys.with_pool(policy.pool), spec_of(job, text(spec)) if spec else None,
                pause is not None or policy.paused_in_file)

    def _feed(self, t: _Target, todo: list[str], line: Any, most: int,
              progress: Progress | None, poll: float) -> list[BackfillFire]:
        """Queue ``todo`` ``most`` at a time, each as a slot frees; the fires as they ended."""
        live: list[str] = []
        ended: list[BackfillFire] = []
        pending = list(todo)
        while pending or live:
            if live:
                pipe = self.redis.pipeline(transaction=False)
                for fid in live:
                    pipe.zscore(t.keys.queue, fid)
                    pipe.zscore(t.keys.working, fid)
                scores = pipe.execute()
                done = [f for i, f in enumerate(live)
                        if scores[2 * i] is None and scores[2 * i + 1] is None]
                live = [f for f in live if f not in done]
                ended += self._ended(t, done, progress)
            take, pending = pending[:most - len(live)], pending[most - len(live):]
            if take:
                states = self.scripts.backfill(t.keys, t.owner, t.job, take, queue=True,
                                               line=line)
                if "queued" in states:
                    line = None  # said once, with the first fires queued
                    self.redis.publish(t.keys.wakeup, "backfill")
                live += [f for f, s in zip(take, states, strict=True) if s == "queued"]
                # Queued, run or died meanwhile (another backfill, a dead retry): left alone.
                ended += [BackfillFire(f, _due(f), s) for f, s in zip(take, states, strict=True)
                          if s != "queued"]
            if live:
                time.sleep(poll)  # an operator command waiting on other processes' runs
        return ended

    def _ended(self, t: _Target, fires: list[str], progress: Progress | None
               ) -> list[BackfillFire]:
        """How the backfilled ``fires``, no longer queued nor in flight, ended."""
        if not fires:
            return []
        states = self.scripts.backfill(t.keys, t.owner, t.job, fires, queue=False)
        out = [BackfillFire(f, _due(f), "not run" if s == "to run" else s, queued=True)
               for f, s in zip(fires, states, strict=True)]
        if progress is not None:
            for f in out:
                progress(f)
        return out


def _refuse_paused(job: str, paused: bool) -> None:
    if paused:
        raise CronsvcError(f"{job} is paused: resume it first (a backfilled fire of a "
                           "paused job would only be skipped)")


def _ms(value: Instant, name: str, now_ms: int, tz: str) -> int:
    if isinstance(value, str):
        try:
            return parse_past(value, now_ms, tz)
        except (ValueError, ScheduleError) as exc:
            raise BadTime(f"backfill {name}: {exc}") from None
    if isinstance(value, datetime):
        if value.tzinfo is None:
            raise BadTime(f"backfill {name} {value.isoformat()}: naive datetime: give a zone")
        return dt_to_ms(value)
    return int(value)


def _minutes(ms: int) -> str:
    """``2026-11-20T02:00Z``: a range's end as a history note says it (the audit log has
    it to the ms)."""
    return ms_to_dt(ms).strftime("%Y-%m-%dT%H:%MZ")


def _due(fid: str) -> int:
    return parse_fire(fid)[1]
