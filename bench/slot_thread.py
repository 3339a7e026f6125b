"""The CPU time of a worker's slot side per no-op ``call`` fire, alone, in one thread.

A drain's per-thread CPU swings with the other threads and processes of a shared machine;
this measures the run path alone, in this process's main thread (``time.thread_time_ns``):
a worker in this process, not running, fed the claims of ``--fires`` due fires of 1,000
no-op ``call`` jobs, ``--batch`` at a time, each claim started as the claim loop starts it
(``Worker._start``: the claim side, measured apart) with the slots' tasks kept, then each
task run in turn as a slot thread runs it (``Worker._run``, its end handed to the results
queue: the slot side). The results are not recorded (their queue is emptied per claim).

With ``--compare DIR``, the same for another version's copy of cronsvc in ``DIR``
(``git archive main cronsvc lua bench | tar -x -C DIR``), interleaved with this tree's,
``--rounds`` processes each (:func:`bench.common.interleaved`).

Run: ``.venv/bin/python -m bench.slot_thread [--fires 60000] [--batch 100]
[--compare DIR]``
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from bench import common
from bench.claim import prepare
from bench.common import K
from cronsvc.config.models import load_config
from cronsvc.store.connection import connect
from cronsvc.store.scripts import Scripts
from cronsvc.worker.heap import settle
from cronsvc.worker.worker import Worker

JOBS = 1000
WORKER = "worker-0@bench:1"


class Kept:
    """Stands in for the worker's slots: keeps the tasks handed to it."""

    def __init__(self) -> None:
        self.tasks: list[tuple[Callable[..., Any], tuple[Any, ...]]] = []

    def submit_many(self, fn: Callable[..., Any], each: list[tuple[Any, ...]]) -> None:
        self.tasks.extend((fn, args) for args in each)

    submit_each = submit_many


def measure(fires: int, batch: int) -> tuple[float, float]:
    """µs of CPU per fire: the claim side (``_start``), the slot side (each ``_run``)."""
    with common.redis_server() as (server, r), tempfile.TemporaryDirectory() as tmp:
        cfg = Path(tmp) / "jobs.yaml"
        cfg.write_text("jobs:\n" + "".join(
            f"  job{i:05d}:\n    cron: '0 0 1 1 *'\n    catch_up: all\n"
            "    call: bench.jobs:noop\n" for i in range(JOBS)))
        config = load_config(cfg)
        scripts = Scripts(r)
        prepare(r, scripts, fires, JOBS, common.server_ms(r) - 86_400_000)
        worker = Worker(config, connect(server.url), worker_id=WORKER)
        pool = Kept()
        worker._pool = pool  # type: ignore[assignment]
        settle()
        queued = worker.results._queue
        start = slot = 0
        done = 0
        while claimed := scripts.claim(K, WORKER, batch=batch, lease_ms=60_000).claimed:
            t0 = time.thread_time_ns()
            worker._start(K, claimed, time.monotonic())
            t1 = time.thread_time_ns()
            for fn, args in pool.tasks:
                fn(*args)
            t2 = time.thread_time_ns()
            start += t1 - t0
            slot += t2 - t1
            done += len(pool.tasks)
            pool.tasks.clear()
            while not queued.empty():
                queued.get_nowait()
            worker._running.clear()
        if done != fires - fires % JOBS:
            sys.exit(f"not every fire ran: {done}")
        return start / done / 1000, slot / done / 1000


def compare(code: str, fires: int, batch: int, rounds: int) -> None:
    """This measure by the cronsvc of ``code`` and by this tree's, interleaved."""
    seen = {path: [(float(out.split()[0]), float(out.split()[1])) for out in outs]
            for path, outs in common.interleaved(
                __file__, code, rounds, ["--fires", str(fires), "--batch", str(batch)]).items()}
    for path, got in seen.items():
        print(f"{path}: claim side {statistics.median(g[0] for g in got):.2f}, slot side "
              f"{statistics.median(g[1] for g in got):.2f} µs CPU per fire (runs: "
              f"{', '.join(f'{g[0]:.2f}/{g[1]:.2f}' for g in got)})")
    print(f"load average at the end: {', '.join(f'{x:.2f}' for x in os.getloadavg())}")


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--fires", type=int, default=60_000)
    ap.add_argument("--batch", type=int, default=100)
    ap.add_argument("--compare", default="", metavar="DIR",
                    help="the cronsvc of DIR (another version's copy), then this tree's")
    ap.add_argument("--rounds", type=int, default=3)
    opts = ap.parse_args(argv)
    if opts.compare:
        compare(opts.compare, opts.fires, opts.batch, opts.rounds)
        return
    start, slot = measure(opts.fires, opts.batch)
    print(f"{start:.2f} {slot:.2f} µs of CPU per fire: claim side, slot side "
          f"({opts.fires} fires, {opts.batch} a claim)")


if __name__ == "__main__":
    main()
