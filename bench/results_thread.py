"""The CPU time of a worker's results thread per no-op success, alone.

A drain's per-thread CPU (100 Hz ticks, the other threads and processes of a shared machine
beside it) swings by a microsecond a fire; this measures the results thread alone, to the
nanosecond (``/proc/self/task/<id>/schedstat``): a worker in this process, not running,
its results thread fed the claims of ``--fires`` due fires of 1,000 no-op ``call`` jobs,
``--batch`` at a time (a drain's batches are 500), each handed over as a slot thread hands
a run's end (``Results.finished``) and recorded as in a drain but for the wait while the
worker claims: the acks, history lines, records of runs, run lines (to /dev/null, in the
``--format`` given) and the worker's ``free``. The claims are made by this process's main
thread, not counted.

``--compare DIR`` measures the cronsvc of ``DIR`` (a copy of another version, e.g.
``git archive main cronsvc lua bench | tar -x -C DIR``) and this tree's in turn,
``--rounds`` each, each in a process of its own.

Run: ``.venv/bin/python -m bench.results_thread [--fires 60000] [--batch 500]
[--compare DIR]``
"""

from __future__ import annotations

import argparse
import logging
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from bench import common
from bench.claim import prepare
from bench.common import K
from cronsvc.config.models import load_config
from cronsvc.process.logs import setup_logging
from cronsvc.run.outcome import Outcome
from cronsvc.store.connection import connect
from cronsvc.store.scripts import Scripts
from cronsvc.worker.running import Running
from cronsvc.worker.worker import Worker

JOBS = 1000
WORKER = "worker-0@bench:1"


def thread_ns(tid: int) -> int:
    """The CPU time a thread of this process has run, ns."""
    with open(f"/proc/self/task/{tid}/schedstat") as f:
        return int(f.read().split()[0])


def measure(fires: int, batch: int, fmt: str) -> float:
    """µs of the results thread's CPU per success."""
    with common.redis_server() as (server, r), tempfile.TemporaryDirectory() as tmp:
        cfg = Path(tmp) / "jobs.yaml"
        cfg.write_text(f"worker:\n  history: {fires // JOBS + 10}\njobs:\n" + "".join(
            f"  job{i:05d}:\n    cron: '0 0 1 1 *'\n    catch_up: all\n"
            "    call: bench.jobs:noop\n" for i in range(JOBS)))
        config = load_config(cfg)
        setup_logging(fmt, "worker-0")
        logging.getLogger().handlers[0].setStream(open(os.devnull, "w"))  # type: ignore[attr-defined]
        scripts = Scripts(r)
        prepare(r, scripts, fires, JOBS, common.server_ms(r) - 86_400_000)
        worker = Worker(config, connect(server.url), worker_id=WORKER)
        worker.results.start()
        tid = worker.results._thread.native_id
        assert tid is not None
        spent = done = 0
        while claimed := scripts.claim(K, WORKER, batch=batch, lease_ms=60_000).claimed:
            now = common.server_ms(r)
            runs = [Running(claim=c, job=config.jobs[c.job], keys=K,
                            hooked=worker.hooks.wanted(config.jobs[c.job])) for c in claimed]
            for run in runs:
                worker._running.add(run)
            before = thread_ns(tid)
            for run in runs:
                worker.results.finished(run, Outcome("ok", now, 0))
            while worker._running:  # until the batch is recorded and freed
                time.sleep(0.0002)
            spent += thread_ns(tid) - before
            done += len(runs)
        worker.results.close()
        if r.zcard(K.working) or done != fires - fires % JOBS:
            sys.exit(f"not every fire was acked: {r.zcard(K.working)} held, {done} done")
        return spent / done / 1000


def compare(code: str, fires: int, batch: int, fmt: str, rounds: int) -> None:
    """This measure by the cronsvc of ``code`` and by this tree's, interleaved."""
    seen = {path: [float(out.split()[0]) for out in outs] for path, outs in common.interleaved(
        __file__, code, rounds, ["--fires", str(fires), "--batch", str(batch),
                                 "--format", fmt]).items()}
    for path, got in seen.items():
        print(f"{path}: results thread {statistics.median(got):.2f} µs CPU per success "
              f"(runs: {', '.join(f'{x:.2f}' for x in got)})")
    print(f"load average at the end: {', '.join(f'{x:.2f}' for x in os.getloadavg())}")


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--fires", type=int, default=60_000)
    ap.add_argument("--batch", type=int, default=500)
    ap.add_argument("--format", default="human", choices=("human", "json"))
    ap.add_argument("--compare", default="", metavar="DIR",
                    help="the cronsvc of DIR (another version's copy), then this tree's")
    ap.add_argument("--rounds", type=int, default=3)
    opts = ap.parse_args(argv)
    if opts.compare:
        compare(opts.compare, opts.fires, opts.batch, opts.format, opts.rounds)
        return
    print(f"{measure(opts.fires, opts.batch, opts.format):.2f} µs of the results thread's "
          f"CPU per success ({opts.fires} fires, {opts.batch} a batch, {opts.format} lines)")


if __name__ == "__main__":
    main()
