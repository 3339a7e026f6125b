"""What every benchmark of ``bench/`` shares: a Redis of its own, a fleet of real
processes, polling with a deadline, percentiles and the figures a report shows."""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil
import redis

from cronsvc import testing
from cronsvc.clock import redis_ms
from cronsvc.fires import parse_fire
from cronsvc.keys import Keys
from cronsvc.process.redis_server import RedisServer
from cronsvc.testing import Fleet, wait_for

K = Keys()


@dataclass
class Figure:
    """One row of the report: a measured value beside its target and a same-run reference."""

    name: str
    value: str
    target: str = "-"
    reference: str = "-"
    met: bool | None = None  # None: the figure has no target

    @property
    def verdict(self) -> str:
        return "-" if self.met is None else ("met" if self.met else "MISSED")


@dataclass
class Section:
    """The figures of one benchmark, with notes on how they were measured."""

    title: str
    figures: list[Figure] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def print(self) -> None:
        print(f"\n## {self.title}")
        for f in self.figures:
            print(f"- {f.name}: {f.value} (target {f.target}: {f.verdict}; "
                  f"reference {f.reference})")
        for note in self.notes:
            print(f"  {note}")


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile of an ascending sequence (q in 0..1)."""
    if not sorted_values:
        return math.nan
    rank = max(1, math.ceil(q * len(sorted_values)))
    return sorted_values[rank - 1]


def lag_summary(lags: Sequence[int]) -> tuple[float, float, float]:
    """p50, p99 and max of lags in ms."""
    ordered = sorted(lags)
    top = ordered[-1] if ordered else math.nan
    return percentile(ordered, 0.50), percentile(ordered, 0.99), top


def server_ms(r: redis.Redis) -> int:
    """The Redis server's clock (TIME) in ms."""
    return redis_ms(r)


def until(r: redis.Redis, at_ms: int, what: str) -> None:
    """Return once the Redis clock reads ``at_ms`` (a window's edge)."""
    wait_for(lambda: server_ms(r) >= at_ms, timeout=(at_ms - server_ms(r)) / 1000 + 10,
             interval=0.002, message=what)


def server_pid(server: RedisServer) -> int:
    assert server.proc is not None, "server not started"
    return server.proc.pid


@contextmanager
def redis_server(**kwargs: Any) -> Iterator[tuple[RedisServer, redis.Redis]]:
    """A redis-server of this benchmark's own (AOF everysec unless told otherwise)."""
    with testing.redis_server(**kwargs) as server:
        client = redis.Redis.from_url(server.url, decode_responses=True)
        try:
            yield server, client
        finally:
            client.close()


@contextmanager
def fleet(url: str, jobs: dict[str, Any], code: str | None = None, **top: Any
          ) -> Iterator[Fleet]:
    """A job file and the planner and worker processes a benchmark starts on it; they run
    the cronsvc of ``code`` (a copy of another version of the repository) if given."""
    with tempfile.TemporaryDirectory(prefix="cronsvc-fleet-") as tmp:
        f = Fleet(Path(tmp), url, jobs, pythonpath=[code] if code else (), **top)
        try:
            yield f
        finally:
            f.stop_all()


def noop_job(cron: str = "* * * * * *", **options: Any) -> dict[str, Any]:
    return {"cron": cron, "call": "bench.jobs:noop", **options}


def wait_workers(r: redis.Redis, count: int, timeout: float = 60) -> None:
    """Until ``count`` workers have recorded their presence (they are claiming)."""
    wait_for(lambda: r.zcard(K.workers) >= count, timeout, message=f"{count} workers to start")


def histories(r: redis.Redis, jobs: Sequence[str]) -> list[dict[str, Any]]:
    """Every history record of ``jobs``, read in one round trip."""
    pipe = r.pipeline(transaction=False)
    for job in jobs:
        pipe.lrange(K.history(job), 0, -1)
    return [json.loads(raw) for rows in pipe.execute() for raw in rows]


def window_drained(r: redis.Redis, end_ms: int) -> bool:
    """No fire due before ``end_ms`` is queued or held any more."""
    if r.zcount(K.queue, "-inf", f"({end_ms}"):
        return False
    return not any(parse_fire(str(fid))[1] < end_ms for fid in r.zrange(K.working, 0, -1))


def drained(left: Callable[[], int], total: int, timeout: float) -> tuple[float, float]:
    """Per second while what ``left`` counts falls from 90 % to 10 % of ``total`` (so
    start-up is not counted), and the seconds from the first fall to empty."""
    samples: list[tuple[float, int]] = []

    def empty() -> bool:
        samples.append((time.monotonic(), left()))
        return samples[-1][1] == 0

    wait_for(empty, timeout, interval=0.02, message="the backlog to drain")
    hi = next(t for t, n in samples if n <= 0.9 * total)
    lo = next(t for t, n in samples if n <= 0.1 * total)
    started = next((t for t, n in samples if n < total), samples[0][0])
    return 0.8 * total / (lo - hi), samples[-1][0] - started


class CpuMeter:
    """CPU seconds used by a set of processes between start() and stop()."""

    def __init__(self, pids: Sequence[int]) -> None:
        self.procs = [psutil.Process(pid) for pid in pids]
        self._start: list[float] = []
        self._t0 = 0.0
        self.per_process: list[float] = []  # share of one core, 0..1
        self.elapsed = 0.0

    @staticmethod
    def _cpu(p: psutil.Process) -> float:
        t = p.cpu_times()
        return float(t.user + t.system)

    def start(self) -> CpuMeter:
        self._t0 = time.monotonic()
        self._start = [self._cpu(p) for p in self.procs]
        return self

    def stop(self) -> list[float]:
        self.elapsed = time.monotonic() - self._t0
        self.per_process = [(self._cpu(p) - s) / self.elapsed
                            for p, s in zip(self.procs, self._start, strict=True)]
        return self.per_process


def cli(doc: str | None, measure: Callable[..., Section], **options: float) -> None:
    """``python -m bench.<name>``: run one benchmark alone and print its figures."""
    ap = argparse.ArgumentParser(description=(doc or "").splitlines()[0])
    for name, default in options.items():
        ap.add_argument(f"--{name}", type=type(default), default=default)
    measure(**vars(ap.parse_args())).print()


def ms(value: float) -> str:
    return "n/a" if math.isnan(value) else f"{value:.0f} ms"


def rate(value: float) -> str:
    return f"{value:,.0f}"


def interleaved(script: str, code: str, rounds: int, args: Sequence[str]) -> dict[str, list[str]]:
    """What ``script`` (a bench file run by itself, with ``args``) prints when run with the
    cronsvc of ``code`` (a copy of another version) and with this tree's, in turn,
    ``rounds`` each, each in a process of its own: per path, each run's output."""
    here = str(Path(__file__).resolve().parents[1])
    seen: dict[str, list[str]] = {code: [], here: []}
    for _ in range(rounds):
        for path, got in seen.items():
            # run as a file: its cronsvc is that of PYTHONPATH, not the cwd's
            got.append(subprocess.run(
                [sys.executable, str(Path(script).resolve()), *args],
                env={**os.environ, "PYTHONPATH": f"{path}:{here}"}, check=True,
                capture_output=True, text=True).stdout)
    return seen
