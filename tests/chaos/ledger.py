"""Judging a chaos run: the fires the config says are due, against what the ledger
says ran and what the history says was decided. Pure: no Redis, no processes.

- Expected fires come from the job file alone, through ``cronsvc.schedule``.
- A fire with no start in the ledger must have a history line (or, failing
  that, a ``dropped`` event from the claim script) saying it was missed or
  skipped by policy; otherwise it is lost.
- A fire started more than once must owe every rerun to a fault, and the
  earlier attempt must never have been acknowledged: the worker running it was
  killed after it started and before the rerun did, or Redis went down while
  that worker held the fire (after it was due, before the attempt finished).
- No fire starts before its scheduled time.
"""

from __future__ import annotations

import collections
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from cronsvc.config import Job
from cronsvc.fires import fire_id
from cronsvc.schedule import occurrences_ms

POLICY = ("missed", "skipped")
# A drop decided just before a fault may have lost its history line with the worker.
DROP_RECORD_WINDOW_MS = 3000
# How long after a run's end its worker may still hold the fire: the lease of the chaos
# workers (a result not recorded by then is lost with the lease).
RESULT_WINDOW_MS = 1000


@dataclass(frozen=True)
class Fault:
    """One injected fault: ``kind`` kill (a worker), redis, planner or stop (all workers)."""

    kind: str
    target: str
    start_ms: int
    end_ms: int


@dataclass
class Totals:
    expected: int = 0
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

    @property
    def duplicates(self) -> int:
        return sum(self.explained.values()) + len(self.unexplained)

    def ok(self) -> bool:
        return not (self.lost or self.unexplained or self.early or self.strangers)

    def lines(self) -> list[str]:
        policy = ", ".join(f"{n} {why}" for why, n in sorted(self.by_policy.items())) or "none"
        why = ", ".join(f"{n} by {k}" for k, n in sorted(self.explained.items())) or "none"
        return [
            f"fires expected: {self.expected}",
            f"fires run: {self.run} ({self.runs} starts, {self.finished} finishes)",
            f"not run, by policy (history): {policy}",
            f"not run, by policy (claim event only, history line lost): {self.drop_event_only}",
            f"dead after lost leases: {self.dead}",
            f"duplicates explained: {sum(self.explained.values())} ({why})",
            f"duplicates unexplained: {len(self.unexplained)}",
            f"lost: {len(self.lost)}",
            f"started early: {len(self.early)}",
            f"runs of fires no schedule has: {len(self.strangers)}",
        ]


def expected_fires(jobs: Mapping[str, Job], start_ms: int, end_ms: int) -> dict[str, int]:
    """Fire id -> due of every fire in (start_ms, end_ms], from the schedules alone."""
    return {fire_id(name, due): due for name, job in jobs.items()
            for due in occurrences_ms(job, start_ms, end_ms)}


def _explain(prev: dict[str, Any], cur: dict[str, Any], prev_end: int | None,
             faults: Iterable[Fault], acked: set[tuple[str, int]]) -> str | None:
    """Why the earlier attempt ``prev`` of a fire was run again as ``cur``, or None."""
    if prev["attempt"] == cur["attempt"] or (prev["fire"], prev["attempt"]) in acked:
        return None
    for f in faults:
        if f.kind == "kill" and f.target == prev["worker"] and \
                prev["at_ms"] <= f.start_ms <= cur["at_ms"]:
            return "worker kill -9"
        # Redis went down while the earlier attempt held the fire: from its start until
        # its result was recorded, which the ledger does not show; a worker records it
        # within a lease of the run's end, or the lease lapses anyway. (A restart between
        # a claim and its start explains nothing: a worker checks a claim that waited
        # that long before it starts it.)
        held = f.end_ms >= prev["at_ms"] and (
            prev_end is None or prev_end + RESULT_WINDOW_MS >= f.start_ms)
        if f.kind == "redis" and held and f.start_ms <= cur["at_ms"]:
            return "Redis restart during the run or before its result was recorded"
    return None


def judge(jobs: Mapping[str, Job], start_ms: int, end_ms: int, ledger: list[dict[str, Any]],
          history: list[dict[str, Any]], events: list[dict[str, Any]],
          faults: list[Fault]) -> Totals:
    """Check a run's ledger against the fires due in (start_ms, end_ms]."""
    want = expected_fires(jobs, start_ms, end_ms)
    t = Totals(expected=len(want))
    starts: dict[str, list[dict[str, Any]]] = collections.defaultdict(list)
    ends: dict[tuple[str, int], int] = {}
    for e in ledger:
        if e["event"] == "start":
            starts[e["fire"]].append(e)
        else:
            ends[e["fire"], e["attempt"]] = e["at_ms"]
            t.finished += e["fire"] in want
    decided = {h["fire"]: h for h in history if h["status"] in (*POLICY, "dead")}
    acked = {(h["fire"], h["attempt"]) for h in history if h["status"] == "ok"}
    drops = {e["fire"]: e for e in events if e.get("event") == "dropped"}
    for fid, ran in starts.items():
        if fid not in want and start_ms < ran[0]["scheduled_ms"] <= end_ms:
            t.strangers.append(fid)
    for fid, due in sorted(want.items(), key=lambda item: item[1]):
        # Attempt k + 1 exists because attempt k lost its lease: pair them in that order.
        ran = sorted(starts.get(fid, []), key=lambda e: (e["attempt"], e["at_ms"]))
        if not ran:
            rec = decided.get(fid)
            drop = drops.get(fid)
            if rec is not None and rec["status"] in POLICY:
                t.by_policy[rec["reason"] or rec["status"]] += 1
            elif rec is not None:
                t.dead += 1
            elif drop is not None and any(
                    f.kind in ("kill", "redis") and
                    drop["at"] <= f.start_ms <= drop["at"] + DROP_RECORD_WINDOW_MS
                    for f in faults):
                t.drop_event_only += 1
            else:
                t.lost.append(fid)
            continue
        t.run += 1
        t.runs += len(ran)
        t.dead += decided.get(fid, {}).get("status") == "dead"
        t.early += [f"{fid} started at {e['at_ms']}" for e in ran if e["at_ms"] < due]
        for prev, cur in zip(ran, ran[1:], strict=False):
            why = _explain(prev, cur, ends.get((fid, prev["attempt"])), faults, acked)
            if why is None:
                t.unexplained.append(f"{fid}: attempt {prev['attempt']} on {prev['worker']} at "
                                     f"{prev['at_ms']}, attempt {cur['attempt']} on "
                                     f"{cur['worker']} at {cur['at_ms']}")
            else:
                t.explained[why] += 1
    return t
