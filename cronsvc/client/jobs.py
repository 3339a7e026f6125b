"""What an operator changes of published jobs and their fires: one-off runs (trigger,
enqueue), cancel, pause and resume, and dead fires (retry, purge).

Each change is a Lua script of :class:`cronsvc.store.scripts.Scripts`; one that took
effect ends with an audit entry (:meth:`cronsvc.client.core.Core.audited`).
"""

from __future__ import annotations

import json
import time
from datetime import datetime, timedelta
from typing import Any, Protocol

import redis

from cronsvc.client.views import JobInfo, Pause, Policy, Resumed, in_flight, spec_of
from cronsvc.clock import dt_to_ms, monotonic
from cronsvc.errors import (
    BadArgument,
    BadTime,
    CronsvcError,
    Skipped,
    StillRunning,
    UnknownFire,
    UnknownJob,
)
from cronsvc.fires import fire_id, new_tag, parse_fire
from cronsvc.keys import Keys
from cronsvc.presence import WAKE_WITHIN_MS
from cronsvc.schedule.expand import occurrences_ms
from cronsvc.schedule.runtime import payload_problem
from cronsvc.schedule.when import due_problem
from cronsvc.store.replies import text
from cronsvc.store.scripts import Scripts

__all__ = ["MAX_CATCH_UP", "JobOps", "JobsContext", "JobsReader"]

#: ``resume(catch_up=True)`` queues at most this many missed fires (the newest).
MAX_CATCH_UP = 1000
_CATCH_UP_WINDOW_MS = 3_600_000
_CATCH_UP_WINDOW_MAX_MS = 32 * 86_400_000


class JobsContext(Protocol):
    """What job operations take of the client's core (:class:`cronsvc.client.core.Core`)."""

    redis: redis.Redis
    scripts: Scripts
    shards: int

    def keys(self, job: str) -> Keys: ...
    def keys_of_fire(self, fid: str) -> Keys: ...
    def all_shards(self) -> list[Keys]: ...
    def shards_of(self, job: str | None) -> list[Keys]: ...
    def server_ms(self) -> int: ...
    def require_job(self, job: str) -> Keys: ...
    def unknown_job(self, job: str, extra: str = "") -> UnknownJob: ...
    def audited(self, action: str, target: str, note: str | None = None,
                **detail: Any) -> None: ...


class JobsReader(Protocol):
    """What job operations read through the fleet reader
    (:class:`cronsvc.client.fleet.FleetReader`): whether a job is paused, where a fire is."""

    def job(self, job: str) -> JobInfo: ...
    def fire_state(self, fid: str) -> str: ...


class JobOps:
    """The changes :class:`cronsvc.Client` makes to published jobs and their fires."""

    def __init__(self, core: JobsContext, reader: JobsReader) -> None:
        self.core = core
        self.redis = core.redis
        self.scripts = core.scripts
        self.reader = reader

    # -- one-off runs ----------------------------------------------------------
    def enqueue(self, job: str, when: int | datetime | timedelta, payload: Any = None, *,
                kind: str = "at", note: str | None = None) -> str:
        """Run ``job`` once at ``when`` with ``payload``; the new fire's id.

        ``when``: ms since the epoch (server clock), an aware datetime, or a
        timedelta from the server's now; not in the past and at most ``RANGE_YEARS``
        (10) years ahead (BadTime otherwise). The payload (any JSON value, at most
        ``MAX_PAYLOAD_BYTES``, 64 KiB, as JSON: BadArgument otherwise) reaches the run
        as ``CRONSVC_PAYLOAD`` or ``ctx.payload``.
        """
        problem = payload_problem(payload)
        if problem:
            raise BadArgument(f"{job}: payload: {problem}")
        keys = self.core.require_job(job)
        now = self.core.server_ms()
        if isinstance(when, timedelta):
            due_ms = now + int(when / timedelta(milliseconds=1))
        elif isinstance(when, datetime):
            if when.tzinfo is None:
                raise BadTime(f"{job}: {when.isoformat()}: naive datetime: give a time zone")
            due_ms = dt_to_ms(when)
        else:
            due_ms = int(when)
        problem = due_problem(due_ms, now)
        if problem:
            raise BadTime(f"{job}: due time {due_ms} ms {problem}")
        fid = fire_id(job, due_ms, new_tag(kind))
        try:
            self.scripts.enqueue(keys, fid, due_ms, payload, bounded=kind == "trigger")
        except Skipped as exc:
            why = str(exc).split("SKIPPED ", 1)[-1]
            raise Skipped(f"{job}: not triggered: its limits would skip it now ({why}); "
                          "try again once the run ends") from None
        if due_ms < now + WAKE_WITHIN_MS:  # an idle worker may sleep that long (as the planner)
            self.redis.publish(keys.wakeup, "enqueue")
        self.core.audited(kind, job, note, fire=fid)
        return fid

    def trigger(self, job: str, payload: Any = None, *, note: str | None = None) -> str:
        """Run ``job`` once now, beside its schedule (paused or not); the new fire's id.

        Skipped, and nothing queued, if the job's overlap, max_concurrent or a named limit
        would skip it now (a run in flight under ``overlap: forbid``, every slot taken); a
        run that starts meanwhile may still make the worker skip it, as its history says.
        """
        return self.enqueue(job, timedelta(0), payload, kind="trigger", note=note)

    def cancel(self, fid: str, *, note: str | None = None) -> bool:
        """Unqueue a fire not started yet; False if it is not queued (running or done).

        BadArgument if ``fid`` is not a fire id.
        """
        parse_fire(fid)
        done = self.scripts.cancel(self.core.keys_of_fire(fid), fid)
        if done:
            self.core.audited("cancel", fid, note)
        return done

    # -- pause -----------------------------------------------------------------
    def pause(self, job: str, note: str | None = None, *, wait: float | None = None) -> Pause:
        """Stop new fires of ``job`` on every worker at once.

        No claim after this call starts a cron fire of the job: each is dropped
        and recorded as skipped (reason ``paused``). Fires claimed before are
        returned in ``in_flight`` and not stopped; with ``wait`` (seconds), the
        call returns only once they ended, so nothing of the job runs after it
        (triggers and ``at`` runs asked for later still do). StillRunning if
        they do not end in time; the job stays paused either way.
        """
        keys = self.core.require_job(job)
        since, held = self.scripts.pause(keys, job, note or "")
        for other in self._other_shards(keys):
            try:
                held += self.scripts.pause(other, job, note or "")[1]
            except UnknownJob:  # that shard has no line of it yet: no fire of it runs there
                pass
        result = Pause(job, since, note or "", [in_flight(*h) for h in held])
        self.core.audited("pause", job, note)
        if wait is None or not result.in_flight:
            return result
        left = self._wait_done([f.fire for f in result.in_flight], wait)
        if left:
            raise StillRunning(f"{job} is paused, but {len(left)} run(s) claimed before are "
                               f"still running after {wait:g}s: {', '.join(left)}")
        return Pause(job, since, note or "", result.in_flight, waited=True)

    def _other_shards(self, keys: Keys) -> list[Keys]:
        """The shards but ``keys``'s: a job paused or resumed in a sharded fleet is so on
        each, where its runtime schedules' fires are claimed."""
        if self.core.shards <= 1:
            return []
        return [k.with_pool(keys.pool) for k in self.core.all_shards() if k.shard != keys.shard]

    def _wait_done(self, fires: list[str], timeout: float) -> list[str]:
        """Poll until none of ``fires`` is in flight; those still in flight at the end."""
        deadline = monotonic() + timeout
        while True:
            pipe = self.redis.pipeline(transaction=False)
            for fid in fires:
                pipe.zscore(self.core.keys_of_fire(fid).working, fid)
            fires = [f for f, s in zip(fires, pipe.execute(), strict=True) if s is not None]
            if not fires or monotonic() >= deadline:
                return fires
            time.sleep(0.05)  # an operator command waiting on other processes' runs

    def resume(self, job: str, *, catch_up: bool = False, note: str | None = None) -> Resumed:
        """Let ``job`` fire again from now; true if it was paused at run time.

        Fires due while it was paused were dropped when due. ``catch_up`` queues
        them again with their own fire ids as the job's ``catch_up`` policy says
        (``latest``: the newest, ``all``: each, at most MAX_CATCH_UP, ``none``:
        none). They then meet the usual rules, the starting deadline included.
        """
        keys = self.core.require_job(job)
        policy = Policy.parse(text(self.redis.hget(keys.jobs, job)))
        for _ in range(5):
            pause_json, truncated = "", False
            fires: list[str] = []
            if catch_up:
                raw = self.redis.hget(keys.paused, job)
                if raw is not None:
                    pause_json = text(raw)
                    fires, truncated = self._missed(keys, job, pause_json, policy.catch_up)
            status, queued_again = self.scripts.resume(keys, job, pause_json, fires)
            if status >= 0:
                break
        else:
            raise CronsvcError(f"the pause of {job} keeps changing: try again")
        for other in self._other_shards(keys):
            self.scripts.resume(other, job)
        self.core.audited("resume", job, note, catch_up=catch_up or None,
                     queued_again=len(queued_again) or None)
        if queued_again:
            self.redis.publish(keys.wakeup, "resume")
        return Resumed(job, status == 1, queued_again, policy.catch_up if catch_up else "",
                       truncated, policy.paused_in_file)

    def _missed(self, keys: Keys, job: str, pause_json: str,
                catch_up: str) -> tuple[list[str], bool]:
        """Fire ids due since the pause began, newest ``latest``/MAX_CATCH_UP of them."""
        want = {"latest": 1, "all": MAX_CATCH_UP}.get(catch_up, 0)
        since = int(json.loads(pause_json).get("since") or 0)
        spec_json = self.redis.hget(keys.specs, job)
        if not want or not since or spec_json is None:
            return [], False
        spec = spec_of(job, text(spec_json))
        # Walk back from now in growing windows: a long pause of a busy job stays cheap.
        hi, size = self.core.server_ms(), _CATCH_UP_WINDOW_MS
        dues: list[int] = []
        while hi > since and len(dues) <= want:
            lo = max(since, hi - size)
            dues = occurrences_ms(spec, lo, hi) + dues
            hi, size = lo, min(size * 2, _CATCH_UP_WINDOW_MAX_MS)
        truncated = catch_up == "all" and len(dues) > want
        return [fire_id(job, d) for d in dues[-want:]], truncated

    # -- dead fires --------------------------------------------------------------
    def dead_retry(self, fid: str, *, note: str | None = None) -> None:
        """Queue a dead fire again now, with the job's full set of attempts.

        UnknownFire if it is not dead; UnknownJob if its job is no longer published;
        CronsvcError if it is a cron fire of a paused job (it would only be skipped).
        """
        job, _, tag = parse_fire(fid)
        keys = self.core.keys_of_fire(fid)
        if not self.redis.hexists(self.core.keys(job).jobs, job):
            raise self.core.unknown_job(job, f" (fire {fid}): a dead fire of a removed job cannot "
                                         "run again; `cronsvc dead purge --job` forgets it")
        if tag is None and self.reader.job(job).paused:
            raise CronsvcError(f"{job} is paused: a retried cron fire would be skipped; "
                               f"resume it first (or `cronsvc trigger {job}`)")
        if not self.scripts.retry_dead(keys, fid):
            raise UnknownFire(f"fire {fid} is not dead (it is {self.reader.fire_state(fid)})")
        self.redis.publish(keys.wakeup, "retry")
        self.core.audited("retry", fid, note)

    def dead_purge(self, job: str | None = None, *, fires: list[str] | None = None,
                   note: str | None = None) -> int:
        """Forget dead fires (of ``job`` only, or only ``fires``, if given) with their
        attempts and payloads; how many went."""
        if fires:
            for fid in fires:
                parse_fire(fid)  # BadArgument for what is not a fire id
            by_shard: dict[Keys, list[str]] = {}
            for fid in fires:
                by_shard.setdefault(self.core.keys_of_fire(fid), []).append(fid)
            gone = sum(self.scripts.purge_dead(keys, job, group)
                       for keys, group in by_shard.items())
            target = fires[0] if len(fires) == 1 else f"{len(fires)} fires"
        else:
            gone = sum(self.scripts.purge_dead(keys, job) for keys in self.core.shards_of(job))
            target = job or "*"
        if gone:
            self.core.audited("purge", target, note, fires=gone)
        return gone

