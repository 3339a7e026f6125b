"""Judging a chaos run: the fires the config says are due, against what the ledger
says ran and what the history says was decided. Pure: no Redis, no processes.

- Expected fires come from the job file alone, through ``cronsvc.schedule.expand``.
- A fire with no start in the ledger must have a history line (or, failing
  that, a ``dropped`` event from the claim script) saying it was missed or
  skipped by policy; otherwise it is lost.
- A fire started more than once must owe every rerun to a fault, and the
  earlier attempt must never have been acknowledged: the worker running it was
  killed after it started and before the rerun did, or Redis went down while
  that worker held the fire (after it was due, before the attempt finished).
- No fire starts before its scheduled time.
- The command of an earlier attempt never runs on once a later attempt has started
  (it was stopped with its worker, or before its lease could lapse), and no process
  of a command outlives its worker (the harness checks that one).
- A run uses the definition of the job file published when it started; a job's
  expected fires follow the file in force (an *epoch*: from one publish to the next),
  and a fire left out by a publish (its job removed, or its schedule changed) has a
  history line saying so. Near a publish, either file's fires may run.
- Runtime schedules changed while the fleet runs (``Change``): every fire a definition
  has while it is in force runs (or is decided by policy, or, just before the call that
  ended the definition, unqueued by it); while a call is under way either definition's
  fires may run; and no first attempt of a definition's fire starts after the call that
  changed or deleted it returned (give or take the time from a claim to its start).
"""

from __future__ import annotations

import collections
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from cronsvc.config.models import Job
from cronsvc.fires import fire_id, schedule_of
from cronsvc.schedule.expand import occurrences_ms

POLICY = ("missed", "skipped")
# A drop decided just before a fault may have lost its history line with the worker.
DROP_RECORD_WINDOW_MS = 3000
# How long after a run's end its worker may still hold the fire: the lease of the chaos
# workers (a result not recorded by then is lost with the lease).
RESULT_WINDOW_MS = 1000
# Around a publish, a fire of either file may run (a claim just before it starts just after).
EPOCH_SLACK_MS = 1500
# A command's start line is written by its work, a Python process started under `sh -c`:
# its worker started it up to this long before (the interpreter's start, on a loaded box).
COMMAND_START_MS = 1000
# Faults during which Redis refuses writes or is away: a lease may lapse under a run.
REDIS_FAULTS = ("redis", "oom", "readonly")
# From a claim to the run's start line: a claim taken just before a schedule changed may
# start just after (a worker never starts a claim older than its lease).
CLAIM_START_MS = 1000
# A fire due this long before a call that changed its schedule may not have been claimed
# yet, and then the call unqueued it (longer during a fault).
UNQUEUE_GRACE_MS = 2000


@dataclass(frozen=True)
class Definition:
    """What a runtime schedule of the churn is: ``job`` every ``every_ms`` from
    ``anchor_ms``, with payload ``{"v": version}`` (a version is never used twice)."""

    job: str
    every_ms: int
    anchor_ms: int
    version: int

    def dues(self, lo: int, hi: int) -> list[int]:
        """Its fire times in (lo, hi], counted here rather than by cronsvc."""
        k = -((self.anchor_ms - lo) // self.every_ms)  # the first k with a due > lo
        first = self.anchor_ms + k * self.every_ms
        if first <= lo:
            first += self.every_ms
        return list(range(first, hi + 1, self.every_ms)) if first <= hi else []


@dataclass(frozen=True)
class Change:
    """One call on schedule ``sid``, sent at ``t0`` and returned at ``t1`` (or, when it
    failed, its effect read back by then): in between either definition may be in force;
    from ``t1`` on, ``after`` (None: the schedule is deleted)."""

    sid: str
    t0: int
    t1: int
    after: Definition | None


@dataclass
class ScheduleFires:
    """What the churn's calls say of the fires of runtime schedules."""

    want: dict[str, int] = field(default_factory=dict)  # fire -> due: must run
    optional: dict[str, int] = field(default_factory=dict)  # may run: a call was under way
    defs: dict[tuple[str, int], Definition] = field(default_factory=dict)  # (sid, version)
    ended: dict[tuple[str, int], Change] = field(default_factory=dict)  # the call that ended it
    ended_by: dict[str, Change] = field(default_factory=dict)  # fire -> that call


def schedule_fires(changes: Iterable[Change], start_ms: int, end_ms: int) -> ScheduleFires:
    """The fires of the churn's schedules in (start_ms, end_ms]."""
    out = ScheduleFires()
    by_sid: dict[str, list[Change]] = collections.defaultdict(list)
    for c in changes:
        by_sid[c.sid].append(c)

    def add(sid: str, d: Definition, lo: int, hi: int, into: dict[str, int],
            ended: Change | None = None) -> None:
        for due in d.dues(max(lo, start_ms), min(hi, end_ms)):
            fid = fire_id(d.job, due, schedule=sid)
            into[fid] = due
            if ended is not None:
                out.ended_by[fid] = ended

    for sid, calls in by_sid.items():
        current: Definition | None = None
        since = 0
        for c in sorted(calls, key=lambda c: c.t0):
            if current is not None:
                add(sid, current, since, c.t0, out.want, c)
                add(sid, current, c.t0, c.t1, out.optional)
                out.ended[sid, current.version] = c
            if c.after is not None:
                add(sid, c.after, c.t0, c.t1, out.optional)
                out.defs[sid, c.after.version] = c.after
            current, since = c.after, c.t1
        if current is not None:
            add(sid, current, since, end_ms, out.want)
    for fid in out.want:
        out.optional.pop(fid, None)
    return out


@dataclass(frozen=True)
class Epoch:
    """From ``at_ms`` (the publish, on the Redis clock) on, the job file ``version`` is in
    force, until the next epoch."""

    at_ms: int
    version: str


@dataclass(frozen=True)
class Fault:
    """One injected fault: ``kind`` kill (a worker), redis, planner, stop (all workers), oom
    and readonly (Redis refuses writes), freeze (a worker stopped past its lease), deploy
    (``target``: the job file rolled out) or broker (the Celery broker restarted)."""

    kind: str
    target: str
    start_ms: int
    end_ms: int


@dataclass
class Totals:
    expected: int = 0
    optional: int = 0  # of the expected: near a publish, may run or not
    run: int = 0
    runs: int = 0
    finished: int = 0
    by_policy: collections.Counter[str] = field(default_factory=collections.Counter)
    drop_event_only: int = 0
    dead: int = 0
    explained: collections.Counter[str] = field(default_factory=collections.Counter)
    lost: list[str] = field(default_factory=list)
    unexplained: list[str] = field(default_factory=list)
    early: list[str] = field(default_factory=list)
    strangers: list[str] = field(default_factory=list)
    overlapping: list[str] = field(default_factory=list)
    wrong_definition: list[str] = field(default_factory=list)
    orphans: list[str] = field(default_factory=list)
    schedule_calls: int = 0
    schedule_fires: int = 0  # of the expected: fires of runtime schedules
    schedule_runs: int = 0  # of the fires run: fires of runtime schedules
    stale: list[str] = field(default_factory=list)
    over_limit: list[str] = field(default_factory=list)  # moments a named limit was exceeded
    # per named limit: the most runs at once, and its cap
    most_at_once: dict[str, tuple[int, int]] = field(default_factory=dict)

    @property
    def duplicates(self) -> int:
        return sum(self.explained.values()) + len(self.unexplained)

    def ok(self) -> bool:
        return not (self.lost or self.unexplained or self.early or self.strangers
                    or self.overlapping or self.wrong_definition or self.orphans or self.stale
                    or self.over_limit)

    def lines(self) -> list[str]:
        policy = ", ".join(f"{n} {why}" for why, n in sorted(self.by_policy.items())) or "none"
        why = ", ".join(f"{n} by {k}" for k, n in sorted(self.explained.items())) or "none"
        return [
            f"fires expected: {self.expected} ({self.optional} of them near a publish, "
            "where either file's fires may run)",
            f"fires run: {self.run} ({self.runs} starts, {self.finished} finishes)",
            f"not run, by policy (history): {policy}",
            f"not run, by policy (claim event only, history line lost): {self.drop_event_only}",
            f"dead after lost leases: {self.dead}",
            f"duplicates explained: {sum(self.explained.values())} ({why})",
            f"duplicates unexplained: {len(self.unexplained)}",
            f"lost: {len(self.lost)}",
            f"started early: {len(self.early)}",
            f"runs of fires no schedule in force has: {len(self.strangers)}",
            f"commands still running when the next attempt started: {len(self.overlapping)}",
            f"runs with the definition of another file: {len(self.wrong_definition)}",
            f"command processes that outlived their worker: {len(self.orphans)}",
            f"runtime schedule calls: {self.schedule_calls}, their fires expected: "
            f"{self.schedule_fires}, run: {self.schedule_runs}",
            f"runs of a schedule definition after the call that ended it returned: "
            f"{len(self.stale)}",
            *(f"limit {name}: at most {n} runs at once (allowed {cap})"
              for name, (n, cap) in sorted(self.most_at_once.items())),
            *([f"moments a limit was exceeded: {len(self.over_limit)}"]
              if self.most_at_once else []),
        ]


def in_force(epochs: list[Epoch], at_ms: int) -> tuple[str, bool]:
    """The version in force at ``at_ms``, and whether ``at_ms`` is near a publish."""
    version = epochs[0].version
    for e in epochs:
        if e.at_ms <= at_ms:
            version = e.version
    near = any(abs(at_ms - e.at_ms) <= EPOCH_SLACK_MS for e in epochs[1:])
    return version, near


def expected_fires(files: Mapping[str, Mapping[str, Job]], epochs: list[Epoch], start_ms: int,
                   end_ms: int) -> tuple[dict[str, int], set[str]]:
    """Fire id -> due of every fire in (start_ms, end_ms] from the schedules of the file in
    force at its due time, and the fires that may run or not (near a publish, of a job whose
    schedule differs between the two files)."""
    want: dict[str, int] = {}
    optional: set[str] = set()
    bounds = [e.at_ms for e in epochs[1:]] + [end_ms]
    lo = start_ms
    for epoch, hi in zip(epochs, bounds, strict=True):
        if hi > lo:
            for name, job in files[epoch.version].items():
                for due in occurrences_ms(job, lo, min(hi, end_ms)):
                    want[fire_id(name, due)] = due
        lo = max(lo, hi)
    for before, after in zip(epochs, epochs[1:], strict=False):
        a, b = files[before.version], files[after.version]
        lo, hi = after.at_ms - EPOCH_SLACK_MS, after.at_ms + EPOCH_SLACK_MS
        for name in a.keys() | b.keys():
            old = set(occurrences_ms(a[name], lo, hi)) if name in a else set()
            new = set(occurrences_ms(b[name], lo, hi)) if name in b else set()
            for due in old ^ new:
                if start_ms < due <= end_ms:
                    want[fire_id(name, due)] = due
                    optional.add(fire_id(name, due))
    return want, optional


def _explain(prev: dict[str, Any], cur: dict[str, Any], prev_end: int | None,
             faults: Iterable[Fault], acked: set[tuple[str, int]], ridden_ms: int = 0
             ) -> str | None:
    """Why the earlier attempt ``prev`` of a fire was run again as ``cur``, or None. A spell
    of refused writes shorter than ``ridden_ms`` explains nothing: leases ride it out."""
    if prev["attempt"] == cur["attempt"] or (prev["fire"], prev["attempt"]) in acked:
        return None
    started = prev["at_ms"] - (COMMAND_START_MS if prev.get("kind") == "command" else 0)
    for f in faults:
        if f.kind == "kill" and f.target == prev["worker"] and \
                started <= f.start_ms <= cur["at_ms"]:
            return "worker kill -9"
        # Redis went down while the earlier attempt held the fire: from its start until
        # its result was recorded, which the ledger does not show; a worker records it
        # within a lease of the run's end, or the lease lapses anyway. (A restart between
        # a claim and its start explains nothing: a worker checks a claim that waited
        # that long before it starts it.)
        held = f.end_ms >= prev["at_ms"] and (
            prev_end is None or prev_end + RESULT_WINDOW_MS >= f.start_ms)
        short = f.kind in ("oom", "readonly") and f.end_ms - f.start_ms < ridden_ms
        if f.kind in REDIS_FAULTS and held and f.start_ms <= cur["at_ms"] and not short:
            return (f"Redis {'restart' if f.kind == 'redis' else f.kind} during the run or "
                    "before its result was recorded")
        if f.kind == "freeze" and f.target == prev["worker"] and held and \
                f.start_ms <= cur["at_ms"]:
            return "worker frozen past its lease"
    return None


def _unqueued_by(change: Change, due: int, faults: Iterable[Fault]) -> bool:
    """Whether a fire due at ``due`` may still have been queued, not yet claimed, when
    ``change`` unqueued it: shortly before, or while a fault held the fleet back."""
    return change.t0 - due <= UNQUEUE_GRACE_MS or any(
        f.start_ms <= change.t0 and f.end_ms + UNQUEUE_GRACE_MS >= due for f in faults)


def judge(files: Mapping[str, Mapping[str, Job]], epochs: list[Epoch], start_ms: int,
          end_ms: int, ledger: list[dict[str, Any]], history: list[dict[str, Any]],
          events: list[dict[str, Any]], faults: list[Fault],
          changes: list[Change] | None = None, lease_ms: int = 1000, ridden_ms: int = 0
          ) -> Totals:
    """Check a run's ledger against the fires due in (start_ms, end_ms]."""
    want, optional = expected_fires(files, epochs, start_ms, end_ms)
    sched = schedule_fires(changes or [], start_ms, end_ms)
    want.update(sched.want)
    want.update(sched.optional)
    optional |= set(sched.optional)
    t = Totals(expected=len(want), optional=len(optional), schedule_calls=len(changes or []),
               schedule_fires=len(sched.want) + len(sched.optional))
    starts: dict[str, list[dict[str, Any]]] = collections.defaultdict(list)
    ends: dict[tuple[str, int], int] = {}
    for e in ledger:
        if e["event"] == "start":
            starts[e["fire"]].append(e)
        else:
            ends[e["fire"], e["attempt"]] = e["at_ms"]
            t.finished += e["fire"] in want
    decided = {h["fire"]: h for h in history if h.get("fire") and
               h["status"] in (*POLICY, "dead")}
    acked = {(h["fire"], h["attempt"]) for h in history if h["status"] == "ok"}
    drops = {e["fire"]: e for e in events if e.get("event") == "dropped"}
    # A publish records the fires it unqueued as one line per job: a range of due times.
    unqueued = [(h["job"], h["first"], h["last"], h["reason"]) for h in history
                if h.get("fires") and h["status"] in ("removed", "replaced")]
    differs = {name for name in set.intersection(*(set(f) for f in files.values()))
               if len({f[name].definition for f in files.values()}) > 1}
    for fid, ran in starts.items():
        if fid not in want and start_ms < ran[0]["scheduled_ms"] <= end_ms:
            t.strangers.append(fid)
        sid = schedule_of(fid)
        for e in ran if sid else []:
            version = int((e.get("payload") or {}).get("v", 0))
            done = sched.ended.get((sid, version))
            if e["attempt"] == 1 and done is not None and e["at_ms"] > done.t1 + CLAIM_START_MS:
                t.stale.append(f"{fid} (version {version}) started at {e['at_ms']}, after the "
                               f"call that ended its definition returned at {done.t1}")
            d = sched.defs.get((sid, version))
            if e["attempt"] == 1 and (d is None or (e["scheduled_ms"] - d.anchor_ms) % d.every_ms):
                t.strangers.append(f"{fid}: not a fire of version {version} of {sid}")
        for e in ran:
            version, near = in_force(epochs, e["at_ms"])
            if e["job"] in differs and e["version"] != version and not near:
                t.wrong_definition.append(f"{fid} attempt {e['attempt']} ran {e['version']} "
                                          f"at {e['at_ms']}, while {version} was in force")
    for fid, due in sorted(want.items(), key=lambda item: item[1]):
        # Attempt k + 1 exists because attempt k lost its lease: pair them in that order.
        ran = sorted(starts.get(fid, []), key=lambda e: (e["attempt"], e["at_ms"]))
        if not ran:
            rec = decided.get(fid)
            drop = drops.get(fid)
            job = fid.split("@", 1)[0]
            gone = next((why for name, first, last, why in unqueued
                         if name == job and first <= due <= last), None)
            if rec is not None and rec["status"] in POLICY:
                t.by_policy[rec["reason"] or rec["status"]] += 1
            elif rec is not None:
                t.dead += 1
            elif gone is not None:
                t.by_policy[gone] += 1
            elif fid in sched.ended_by and _unqueued_by(sched.ended_by[fid], due, faults):
                t.by_policy["unqueued by a schedule change"] += 1
            elif drop is not None and any(
                    f.kind in ("kill", *REDIS_FAULTS) and
                    drop["at"] <= f.start_ms <= drop["at"] + DROP_RECORD_WINDOW_MS
                    for f in faults):
                t.drop_event_only += 1
            elif fid not in optional:
                t.lost.append(fid)
            continue
        t.run += 1
        t.schedule_runs += "!" in fid
        t.runs += len(ran)
        t.dead += decided.get(fid, {}).get("status") == "dead"
        t.early += [f"{fid} started at {e['at_ms']}" for e in ran if e["at_ms"] < due]
        for prev, cur in zip(ran, ran[1:], strict=False):
            prev_end = ends.get((fid, prev["attempt"]))
            why = _explain(prev, cur, prev_end, faults, acked, ridden_ms)
            if why is None:
                t.unexplained.append(f"{fid}: attempt {prev['attempt']} on {prev['worker']} at "
                                     f"{prev['at_ms']}, attempt {cur['attempt']} on "
                                     f"{cur['worker']} at {cur['at_ms']}")
            else:
                t.explained[why] += 1
            if prev.get("kind") == "command" and prev_end is not None \
                    and prev_end > cur["at_ms"]:
                t.overlapping.append(f"{fid}: attempt {prev['attempt']} on {prev['worker']} "
                                     f"ended at {prev_end}, after attempt {cur['attempt']} "
                                     f"started on {cur['worker']} at {cur['at_ms']}")
    t.over_limit, t.most_at_once = limits_kept(files, ledger, faults, lease_ms)
    return t


def limits_kept(files: Mapping[str, Mapping[str, Job]], ledger: list[dict[str, Any]],
                faults: list[Fault], lease_ms: int
                ) -> tuple[list[str], dict[str, tuple[int, int]]]:
    """Each moment more runs of a named limit's jobs overlapped (start to end, from the
    ledger) than it allows, and per limit the most at once and its cap. A run with no end
    line died with its worker: at the kill, or within a lease of a freeze or a Redis fault
    (its watchdog's deadline); a run no fault explains counts for
    :data:`UNEXPLAINED_RUN_MS`."""
    caps: dict[str, int] = {}
    members: dict[str, set[str]] = collections.defaultdict(set)
    for jobs in files.values():
        for job in jobs.values():
            for name, cap in job.slot_limits:
                caps[name] = cap
                members[name].add(job.name)
    ends = {(e["fire"], e["attempt"]): e["at_ms"] for e in ledger if e["event"] == "end"}
    problems: list[str] = []
    most: dict[str, tuple[int, int]] = {}
    for name, cap in caps.items():
        moments: list[tuple[int, int, str]] = []
        for e in ledger:
            if e["event"] == "start" and e["job"] in members[name]:
                run = f"{e['fire']} attempt {e['attempt']}"
                end = ends.get((e["fire"], e["attempt"])) or _died(e, faults, lease_ms)
                moments += [(e["at_ms"], 1, run), (end, -1, run)]
        now, top, running = 0, 0, set()
        for at, step, run in sorted(moments, key=lambda m: (m[0], m[1])):  # ends first
            now += step
            running.symmetric_difference_update({run})
            top = max(top, now)
            if now > cap:
                problems.append(f"limit {name}: {now} runs at {at}: {', '.join(sorted(running))}")
        most[name] = (top, cap)
    return problems, most


#: How long a run that ended without a word, and no fault explains, is counted as running.
UNEXPLAINED_RUN_MS = 10_000


def _died(start: dict[str, Any], faults: list[Fault], lease_ms: int) -> int:
    # A worker is killed once, and starts nothing after: its kill ends its runs, even one
    # whose start line its command wrote a few ms after the kill (spawned before it).
    for f in faults:
        if f.kind == "kill" and f.target == start["worker"]:
            return max(f.start_ms, int(start["at_ms"]))
    for f in sorted(faults, key=lambda f: f.start_ms):
        if f.start_ms < start["at_ms"]:
            continue
        if (f.kind == "freeze" and f.target == start["worker"]) or f.kind in REDIS_FAULTS:
            return f.start_ms + lease_ms
    return int(start["at_ms"]) + UNEXPLAINED_RUN_MS
