"""`command` fires: their lag when idle, and the CPU a worker spends on each.

- Lag: the idle fleet of ``bench/lag.py`` (30 every-second jobs, 10 of them `command`
  jobs of ``true``), its `command` jobs' lag over a window; reference in the same run:
  APScheduler 3 running ``true`` with ``subprocess.run`` in this process.
- Burst: :data:`BURST` commands started at once from as many threads of this process,
  as a worker's slots start the `command` fires of one claim: how long until the last is
  running. Reference, same run: the same commands started as a command the watchdog
  cannot find is (no fire in its environment: pdeathsig through ``setpriv``).
- CPU: :data:`FIRES` fires of a `command` job (``true``) queued due at once, drained by
  one worker process; the CPU time of its whole tree (the worker, the commands it
  started and reaped, its watchdog) divided by the fires, and the worker's own share.
  Reference, same run: ``subprocess.run(["true"])`` in this process, per call.

Run: ``.venv/bin/python -m bench.spawn [--seconds 30] [--fires 2000]``
"""

from __future__ import annotations

import os
import resource
import statistics
import subprocess
import threading
import time

import psutil

from bench import common, lag
from bench.common import Figure, K, Section
from cronsvc.run.outcome import Stop
from cronsvc.run.processes import run_group
from cronsvc.run.watchdog import Leash, Watchdog
from cronsvc.testing import published, wait_for

FIRES = 2000
CONCURRENCY = 8
BURST = 10
BURST_ROUNDS = 40
JOBS = 10  # the fires are spread over jobs: one job's fires run one after another anyway


class _Timed(Leash):
    """A run's leash that notes when its command is running."""

    at = 0.0

    def started(self, pgid: int) -> None:
        self.at = time.perf_counter()
        super().started(pgid)


def burst(dog: Watchdog, env: dict[str, str]) -> float:
    """ms from the go until the last of BURST commands started at once is running."""
    leashes = [_Timed(dog, lambda: time.monotonic() + 60) for _ in range(BURST)]
    go = threading.Barrier(BURST + 1)

    def run(leash: Leash) -> None:
        go.wait()
        run_group(["true"], None, env, Stop(threading.Event(), guard=leash))

    threads = [threading.Thread(target=run, args=(leash,)) for leash in leashes]
    for t in threads:
        t.start()
    t0 = time.perf_counter()
    go.wait()
    for t in threads:
        t.join()
    return (max(leash.at for leash in leashes) - t0) * 1000


def bursts(rounds: int) -> tuple[list[float], list[float]]:
    """Bursts of commands the watchdog finds by their fire, and of ones it cannot, in turn."""
    dog = Watchdog()
    dog.start()
    fire = {**os.environ, "CRONSVC_FIRE_ID": "bench@1", "CRONSVC_ATTEMPT": "1"}
    plain = {k: v for k, v in os.environ.items() if not k.startswith("CRONSVC_")}
    found: list[float] = []
    unfound: list[float] = []
    try:
        for _ in range(rounds):
            found.append(burst(dog, fire))
            unfound.append(burst(dog, plain))
    finally:
        dog.close()
    return found, unfound


def spread(ms: list[float]) -> str:
    ordered = sorted(ms)
    return f"p50 {statistics.median(ordered):.1f} ms, p90 {common.percentile(ordered, 0.9):.1f} ms"


def tree_cpu(worker: psutil.Process) -> tuple[float, float]:
    """CPU seconds of the worker itself, and of its whole tree (reaped commands and the
    live watchdog included)."""
    t = worker.cpu_times()
    own = t.user + t.system
    total = own + t.children_user + t.children_system
    for child in worker.children():
        try:
            c = child.cpu_times()
        except psutil.Error:
            continue
        total += c.user + c.system
    return own, total


def command_cpu(fires: int) -> tuple[float, float, float]:
    """µs of CPU per `command` fire: the worker tree's, the worker's own; and seconds to drain."""
    jobs = {f"true-{i}": {"cron": "0 0 1 1 *", "command": ["true"], "retries": 0}
            for i in range(JOBS)}
    with common.redis_server() as (server, r), common.fleet(
            server.url, jobs, worker={"history": fires}) as f:
        client = published(server.url, f.config)
        for i in range(fires):
            client.trigger(f"true-{i % JOBS}")
        worker = psutil.Process(f.worker("worker", "--concurrency", str(CONCURRENCY)).pid)
        common.wait_workers(r, 1)
        wait_for(lambda: r.zcard(K.working) or r.zcard(K.queue) < fires, 60,
                 message="a first claim")
        own0, total0 = tree_cpu(worker)
        t0 = time.monotonic()
        wait_for(lambda: sum(r.llen(K.history(job)) for job in jobs) >= fires, 600,
                 interval=0.05, message="every fire to be recorded")
        seconds = time.monotonic() - t0
        own1, total1 = tree_cpu(worker)
        records = common.histories(r, list(jobs))
        assert sum(rec["status"] == "ok" for rec in records) == fires, "fires not ok"
    return (total1 - total0) / fires * 1e6, (own1 - own0) / fires * 1e6, seconds


def reference_cpu(calls: int) -> float:
    """µs of CPU per ``subprocess.run(["true"])`` in this process, the child's included."""
    before = [resource.getrusage(who) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)]
    for _ in range(calls):
        subprocess.run(["true"], check=True)
    after = [resource.getrusage(who) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)]
    used = sum(a.ru_utime + a.ru_stime - b.ru_utime - b.ru_stime
               for a, b in zip(after, before, strict=True))
    return used / calls * 1e6


def measure(seconds: float = 30.0, fires: int = FIRES) -> Section:
    section = Section("`command` fires: idle lag and CPU per fire")
    idle = lag.fleet_lag(lag.idle_jobs(), seconds)
    ref = lag.apscheduler_lag({"call": 10, "cmd": 10}, seconds, threads=20)
    p99 = common.lag_summary(idle.lags["cmd"])[1]
    section.figures.append(Figure(
        "fire lag, idle, `command` jobs (10 of 30)", lag.summary(idle.lags["cmd"]),
        "p99 < 10 ms", "APScheduler 3, same jobs, this process: " + lag.summary(ref["cmd"]),
        p99 < 10))
    found, unfound = bursts(BURST_ROUNDS)
    section.figures.append(Figure(
        f"{BURST} commands started at once: the last one running after", spread(found),
        reference="commands the watchdog cannot find by their fire (setpriv): "
                  + spread(unfound)))
    total, own, drained = command_cpu(fires)
    ref_cpu = reference_cpu(min(fires, 1000))
    section.figures.append(Figure(
        "worker CPU per `command` fire (true)", f"{total:.0f} µs, of which the worker "
        f"process itself {own:.0f} µs", reference=f'subprocess.run(["true"]) in this '
        f"process: {ref_cpu:.0f} µs per call"))
    section.notes.append(
        f"lag: {lag.WORKERS} workers --concurrency {lag.CONCURRENCY}, window {seconds:.0f} s, "
        f"{idle.expected:,} fires expected; {idle.problems}.")
    section.notes.append(
        f"burst: {BURST} threads of this process start `true` at once, {BURST_ROUNDS} "
        "rounds of each kind, in turn, beside one watchdog.")
    section.notes.append(
        f"CPU: {fires:,} `command` fires of {JOBS} jobs queued due, one worker "
        f"--concurrency {CONCURRENCY}, drained in {drained:.1f} s; the tree counts the "
        "worker, the commands it reaped and its watchdog.")
    return section


if __name__ == "__main__":
    common.cli(__doc__, measure, seconds=30.0, fires=FIRES)
