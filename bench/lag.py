"""Fire lag: actual start minus scheduled time, from the workers' history records.

Two fleets of real processes (one planner, 4 workers) on a redis-server of
their own, each measured over a window of every-second fires:

- loaded: 1,000 `call` jobs firing every second;
- idle: 30 jobs, 10 `call`, 10 async `call` (an ``async def``, awaited on the
  worker's event loop) and 10 `command` (``true``), firing every second.

A history record carries ``scheduled`` and ``started`` on the Redis server
clock, so the lag needs no clock of the bench. Every fire of the window is
checked too: each must have exactly one ``ok`` record.

Reference, measured in the same run: APScheduler 3 (a dependency of cronsvc)
running the same jobs in this one process, lag taken from its own
``scheduled_run_time``; for the async `call` jobs, the sync `call` jobs of the same
fleet and window.

Run: ``.venv/bin/python -m bench.lag [--seconds 60]``
"""

from __future__ import annotations

import collections
import subprocess
import time
from dataclasses import dataclass, field
from datetime import UTC

from bench import common
from bench.common import Figure, K, Section
from bench.jobs import noop
from cronsvc.fires import fire_id
from cronsvc.schedule.expand import Spec, occurrences_ms
from cronsvc.testing import wait_for

WORKERS = 4
CONCURRENCY = 32
EVERY_SECOND = "* * * * * *"
PUBLISHED = ("APScheduler 3 single process p99 17-34 ms; RedBeat 39 ms (minute jobs), "
             "0.93 s (1 s interval); arq 0.4-0.6 s; rq-scheduler 0.5 s (-i 1), 48 s default")


@dataclass
class LagRun:
    """Lags (ms) by kind of job over one window, and what went wrong in it."""

    lags: dict[str, list[int]] = field(default_factory=lambda: collections.defaultdict(list))
    expected: int = 0
    missing: int = 0
    duplicates: int = 0
    not_ok: collections.Counter[str] = field(default_factory=collections.Counter)
    worker_cpu: list[float] = field(default_factory=list)

    @property
    def problems(self) -> str:
        bad = [f"{self.missing} missing", f"{self.duplicates} duplicated"] + [
            f"{n} {status}" for status, n in self.not_ok.items()]
        return ", ".join(bad)

    @property
    def clean(self) -> bool:
        return not (self.missing or self.duplicates or self.not_ok)


def kind(job: str) -> str:
    return job.split("-", 1)[0]


def fleet_lag(jobs: dict[str, dict[str, object]], seconds: float, warmup: float = 5.0,
              code: str | None = None) -> LagRun:
    """Run a planner and WORKERS workers on ``jobs``; lags of the fires due in a window
    (``code``: the processes run the cronsvc found there, see ``common.fleet``)."""
    with common.redis_server() as (server, r), common.fleet(
        server.url, jobs, code, planner={"horizon": 60}, worker={"history": 1000}
    ) as f:
        f.start("planner", "planner", "--tick", "5")
        for i in range(WORKERS):
            f.worker(f"worker-{i}", "--concurrency", str(CONCURRENCY))
        common.wait_workers(r, WORKERS)
        first = K.history(next(iter(jobs)))
        wait_for(lambda: r.llen(first), 60, message="a first run")
        start = (common.server_ms(r) // 1000 + 1 + int(warmup)) * 1000
        end = start + int(seconds * 1000)
        common.until(r, start, "the window to open")
        cpu = common.CpuMeter([p.pid for n, p in f.procs.items() if n.startswith("worker")])
        cpu.start()
        common.until(r, end, "the window to close")
        cpu.stop()
        wait_for(lambda: common.window_drained(r, end), 300, interval=0.2,
                 message="every fire of the window to finish")
        records = common.histories(r, list(jobs))
    run = LagRun(worker_cpu=cpu.per_process)
    ok: collections.Counter[str] = collections.Counter()
    for rec in records:
        if not start <= rec["scheduled"] < end:
            continue
        if rec["status"] != "ok":
            run.not_ok[rec["status"]] += 1
            continue
        ok[rec["fire"]] += 1
        run.lags[kind(rec["job"])].append(rec["started"] - rec["scheduled"])
    for name, job in jobs.items():
        for due in occurrences_ms(Spec(cron=str(job["cron"]), name=name), start - 1, end - 1):
            run.expected += 1
            n = ok.pop(fire_id(name, due), 0)
            run.missing += n == 0
            run.duplicates += max(n - 1, 0)
    run.duplicates += sum(ok.values())  # ok records of fires no schedule has: none expected
    return run


def true_command() -> None:
    subprocess.run(["true"], check=True)


def apscheduler_lag(kinds: dict[str, int], seconds: float, threads: int) -> dict[str, list[int]]:
    """APScheduler 3 in this process: ``kinds`` maps kind -> number of every-second jobs."""
    from apscheduler.events import EVENT_JOB_EXECUTED, JobExecutionEvent
    from apscheduler.executors.pool import ThreadPoolExecutor
    from apscheduler.schedulers.background import BackgroundScheduler

    funcs = {"call": noop, "cmd": true_command}
    lags: dict[str, list[int]] = collections.defaultdict(list)
    sched = BackgroundScheduler(timezone=UTC, executors={"default": ThreadPoolExecutor(threads)})

    def timed(which: str) -> tuple[str, float]:
        started = time.time()
        funcs[which]()
        return which, started

    def done(event: JobExecutionEvent) -> None:
        which, started = event.retval
        if window[0] <= event.scheduled_run_time.timestamp() < window[1]:
            lags[which].append(round((started - event.scheduled_run_time.timestamp()) * 1000))

    window = (0.0, 0.0)
    sched.add_listener(done, EVENT_JOB_EXECUTED)
    for which, count in kinds.items():
        for _ in range(count):
            sched.add_job(timed, "cron", second="*", args=[which], misfire_grace_time=None)
    sched.start()
    begin = time.time() // 1 + 3
    window = (begin, begin + seconds)
    wait_for(lambda: time.time() >= window[1] + 2, seconds + 10, interval=0.2,
             message="the reference window to close")
    sched.shutdown(wait=True)
    return lags


def summary(lags: list[int]) -> str:
    p50, p99, top = common.lag_summary(lags)
    return f"p50 {common.ms(p50)}, p99 {common.ms(p99)}, max {common.ms(top)} ({len(lags):,} fires)"


def idle_jobs() -> dict[str, dict[str, object]]:
    """The idle fleet's 30 jobs: 10 `call`, 10 async `call`, 10 `command` every second."""
    call = common.noop_job(EVERY_SECOND, catch_up="all")
    jobs = {f"call-{i:02d}": call for i in range(10)}
    jobs |= {f"async-{i:02d}": {**call, "call": "bench.jobs:async_noop"} for i in range(10)}
    jobs |= {f"cmd-{i:02d}": {"cron": EVERY_SECOND, "command": ["true"], "catch_up": "all"}
             for i in range(10)}
    return jobs


def loaded_jobs() -> dict[str, dict[str, object]]:
    """The loaded fleet's jobs: 1,000 no-op `call` jobs every second."""
    call = common.noop_job(EVERY_SECOND, catch_up="all")
    return {f"call-{i:04d}": call for i in range(1000)}


def measure(seconds: float = 60.0) -> Section:
    section = Section("Fire lag (start minus scheduled time)")
    idle = fleet_lag(idle_jobs(), seconds)
    ref_idle = apscheduler_lag({"call": 10, "cmd": 10}, seconds, threads=20)
    loaded = fleet_lag(loaded_jobs(), seconds)
    ref_loaded = apscheduler_lag({"call": 1000}, seconds, threads=20)
    aps = "APScheduler 3, same jobs, this process: "
    rows = (
        ("idle, `call` jobs (10 of 30)", idle.lags["call"], 10, aps + summary(ref_idle["call"])),
        ("idle, async `call` jobs (10 of 30)", idle.lags["async"], 10,
         "sync `call` jobs of the same fleet and window: " + summary(idle.lags["call"])),
        ("idle, `command` jobs (10 of 30)", idle.lags["cmd"], 10, aps + summary(ref_idle["cmd"])),
        ("loaded, 1,000 `call` jobs", loaded.lags["call"], 50,
         aps + summary(ref_loaded["call"])),
    )
    for name, lags, target, ref in rows:
        p99 = common.lag_summary(lags)[1]
        section.figures.append(Figure(
            f"fire lag {name}", summary(lags), f"p99 < {target} ms", ref, p99 < target))
    for name, run in (("idle", idle), ("loaded", loaded)):
        cpu = ", ".join(f"{c:.0%}" for c in run.worker_cpu)
        section.notes.append(
            f"{name}: {run.expected:,} fires expected in the window; {run.problems}; "
            f"worker CPU (share of one core): {cpu}")
        if not run.clean:
            section.notes.append(f"{name}: CORRECTNESS PROBLEM, see the counts above")
    section.notes.append(
        f"{WORKERS} worker processes, --concurrency {CONCURRENCY}, planner --tick 5, horizon 60 s, "
        f"catch_up all; window {seconds:.0f} s after a 5 s warm-up; APScheduler with a "
        f"20-thread pool. Published figures of the usual alternatives: {PUBLISHED}.")
    return section


if __name__ == "__main__":
    common.cli(__doc__, measure, seconds=60.0)
