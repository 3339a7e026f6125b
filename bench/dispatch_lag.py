"""The lag of dispatched fires (`bench/dispatch.py`): from a fire's scheduled time to its
task's start in the queue's own worker, step by step, on an idle fleet; the same
consumer's lag for messages of the library's own enqueue loop; and the first fire of a
freshly started cronsvc worker, with its queue clients made ahead (``Kind.prepare``)
and without (:mod:`bench.unprepared`)."""

from __future__ import annotations

import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import redis

from bench import common
from bench.common import K
from bench.dispatch_targets import Target
from cronsvc.fires import parse_fire
from cronsvc.run.dispatch import Delivery
from cronsvc.testing import read_ledger, wait_for

#: The steps of a fire's lag, in order (see :class:`Lag`).
STEPS = ("run", "sending", "sent", "started", "task")
#: The lag jobs: each every second, their fires 200 ms apart, so each fire is alone.
LAG_JOBS = 5
#: Fires of the lag jobs not counted: those of the first seconds after the workers start.
WARM_UP = 2 * LAG_JOBS
#: First fires of a fresh worker measured with its clients prepared, and as many without.
COLD_TRIES = 3


def stamps(ledger: Path) -> dict[str, float]:
    """Task id or fire id -> when ``stamp`` started (epoch seconds)."""
    return {str(e["fire"]): float(e["started"]) for e in read_ledger(ledger)}


def summary(values: list[int]) -> str:
    """p50, p95, p99 and max of lags in ms."""
    ordered = sorted(values)
    if not ordered:
        return "n/a"
    return ", ".join(f"{name} {common.ms(common.percentile(ordered, q))}"
                     for name, q in (("p50", 0.5), ("p95", 0.95), ("p99", 0.99), ("max", 1)))


def plain_lag(target: Target, broker_url: str, ledger: Path, count: int) -> list[int]:
    """ms from the plain loop's send to the task's start, one message at a time (the
    reference of the lag: the consumer's own)."""
    lags = []
    for i in range(count):
        tid = f"plain-{i}"
        sent = time.time()
        target.plain(broker_url, None, target.tasks["stamp"],
                     [Delivery(tid, "plain", 0, 1, "-")])
        wait_for(lambda tid=tid: tid in stamps(ledger), 30, interval=0.002,
                 message="a plain task to start")
        lags.append(int((stamps(ledger)[tid] - sent) * 1000))
    return lags


@dataclass
class Lag:
    """Per fire, ms from its scheduled time to each step: the run's start in a cronsvc
    worker (history), its delivery begun (``sending``), ``sent`` (the broker took it),
    ``started`` by the consumer's guard (the deliveries' stream, on the Redis clock), and
    the task's start (its own clock)."""

    fires: dict[str, dict[str, int]]  # fire id -> step -> ms

    def step(self, name: str) -> list[int]:
        return [marks[name] for marks in self.fires.values() if name in marks]

    def total(self) -> list[int]:
        return self.step("task")

    def lines(self) -> list[str]:
        """Each step's summary, then the worst fires step by step."""
        out = [f"{name}: {summary(self.step(name))}" for name in STEPS]
        worst = sorted(self.fires.items(), key=lambda kv: -kv[1].get("task", 0))[:3]
        for fid, marks in worst:
            out.append(f"a worst fire, {fid}: " + ", ".join(
                f"{name} {marks[name]}" for name in STEPS if name in marks) + " ms")
        return out


def lag_jobs(target: Target, broker_url: str) -> dict[str, dict[str, object]]:
    """Each every second, anchored 1000 / LAG_JOBS ms apart: one fire at a time."""
    gap = 1000 // LAG_JOBS
    return {f"tick{i}": {"every": "1s", "anchor": f"2026-01-01T00:00:00.{i * gap:03d}Z",
                         "timeout": "30s",
                         target.kind: target.job(broker_url, None, True, target.tasks["stamp"])}
            for i in range(LAG_JOBS)}


def fleet_lag(target: Target, r: redis.Redis, url: str, broker_url: str, ledger: Path,
              count: int, workers: int) -> Lag:
    """From scheduled time to the task's start, step by step: the lag jobs, ``count``
    fires after the warm-up, a planner and ``workers``, otherwise idle."""
    r.flushall()
    jobs = lag_jobs(target, broker_url)
    with common.fleet(url, jobs) as f:
        f.planner()
        for i in range(workers):
            f.worker(f"worker-{i}")

        def fires() -> list[tuple[int, str, float]]:
            return sorted((parse_fire(fid)[1], fid, t) for fid, t in stamps(ledger).items()
                          if fid.startswith("tick"))

        wait_for(lambda: len(fires()) >= count + WARM_UP, count + 60,
                 message=f"{count + WARM_UP} fires of the lag jobs")
    runs = {rec["fire"]: rec for rec in common.histories(r, list(jobs))}
    lag = Lag({})
    for due, fid, t in fires()[WARM_UP:WARM_UP + count]:
        steps = {fields["state"]: int(fields["t"]) - due
                 for _, fields in r.xrange(K.deliveries(fid)) if fields.get("d") == "1"}
        lag.fires[fid] = {"run": int(runs.get(fid, {}).get("started") or 0) - due, **steps,
                          "task": int(t * 1000) - due}
    return lag


def cold_first_fires(target: Target, r: redis.Redis, url: str, broker_url: str,
                     ledger: Path, tries: int) -> tuple[list[int], list[int]]:
    """ms from a trigger to the task's start for the first fire of a worker started just
    before (2 s: it is claiming, and has made what it makes ahead), ``tries`` times with
    the worker as it is and as many without preparing, alternately."""
    prepared: list[int] = []
    unprepared: list[int] = []
    for i in range(2 * tries):
        r.flushall()
        jobs = {"cold": {"timeout": "30s", target.kind: target.job(
            broker_url, None, True, target.tasks["stamp"])}}
        with common.fleet(url, jobs) as f:
            name = f"cold-{i}"
            if i % 2:
                argv = [sys.executable, "-m", "bench.unprepared", "worker", "--config",
                        str(f.config), "--redis-url", url, "--name", name]
                log = open(f.tmp / f"{name}.log", "ab")  # noqa: SIM115 - the child's
                f.procs[name] = subprocess.Popen(argv, cwd=f.tmp, env=f.env, stdout=log,
                                                 stderr=log, stdin=subprocess.DEVNULL)
                log.close()
            else:
                f.worker(name)
            common.wait_workers(r, 1)
            time.sleep(2)  # a worker that has been up a while: what the bench compares
            fid = f.trigger("cold")
            wait_for(lambda fid=fid: fid in stamps(ledger), 30, interval=0.002,
                     message="the first fire's task to start")
        (unprepared if i % 2 else prepared).append(
            int(stamps(ledger)[fid] * 1000) - parse_fire(fid)[1])
    return prepared, unprepared
