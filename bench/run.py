"""``make bench``: every benchmark of cronsvc, one after the other, into bench/REPORT.md.

Each benchmark starts its own redis-server (the binary ``cronsvc.process.redis_server``
finds) and its own processes, and measures a reference in the same run. A
benchmark that fails is reported as such and the others still run.

Run: ``.venv/bin/python bench/run.py [--seconds 60] [--quick]``
(``--quick``: short windows and small workloads, to try the suite; not for the report).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import (  # noqa: E402
    cost,
    dispatch,
    fill,
    idle,
    lag,
    recovery,
    schedules,
    spawn,
    throughput,
    trigger,
    web,
)
from bench.common import Figure, Section  # noqa: E402
from bench.report import machine, render  # noqa: E402

HERE = Path(__file__).resolve().parent
REPORT = HERE / "REPORT.md"


def guarded(title: str, bench: Callable[[], Section]) -> Section:
    print(f"running: {title} ...", flush=True)
    t0 = time.monotonic()
    try:
        section = bench()
    except Exception as exc:  # one broken benchmark must not hide the others' figures
        # (a wait that timed out raises cronsvc.testing.WaitTimeout)
        traceback.print_exc()
        section = Section(title, [Figure(title, f"FAILED: {type(exc).__name__}: {exc}",
                                         met=False)])
    section.notes.append(f"took {time.monotonic() - t0:.0f} s")
    section.print()
    return section


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=60.0, help="length of each timed window")
    ap.add_argument("--quick", action="store_true", help="short runs to try the suite")
    ap.add_argument("--output", type=Path, default=None,
                    help=f"where to write the report (default {REPORT.name}; --quick: nowhere)")
    opts = ap.parse_args()
    seconds = 10.0 if opts.quick else opts.seconds
    fires = 20_000 if opts.quick else 100_000
    t0 = time.monotonic()
    host = machine()
    sections = [
        guarded("fire lag", lambda: lag.measure(seconds)),
        guarded("`command` fires", lambda: spawn.measure(seconds, 500 if opts.quick else 2000)),
        guarded("dispatch throughput", lambda: throughput.measure(fires)),
        guarded("cost of a fire", lambda: cost.measure(fires // 2)),
        guarded("dispatch into queues", lambda: dispatch.measure(
            *((2_000, 200, 20) if opts.quick else (20_000, 1_000, 300)))),
        guarded("planner fill", fill.measure),
        guarded("idle cost", lambda: idle.measure(seconds)),
        guarded("trigger latency", lambda: trigger.measure(10 if opts.quick else 50)),
        guarded("recovery", lambda: recovery.measure(
            ((2.0, 1),) if opts.quick else recovery.TRIALS)),
        guarded("runtime schedules", lambda: schedules.measure(
            *((20_000, 0.5, 5_000) if opts.quick else (1_000_000, 5.0, 100_000)))),
        guarded("dashboard and API", lambda: web.measure(
            *((1_000, 10_000, 20) if opts.quick else (10_000, 1_000_000, 200)))),
    ]
    command = "make bench" if not (opts.quick or opts.seconds != 60) else " ".join(
        ["python bench/run.py", *sys.argv[1:]])
    text = render(host, sections, (time.monotonic() - t0) / 60, command)
    print("\n" + text)
    output = opts.output or (None if opts.quick else REPORT)
    if output is not None:
        tmp = output.with_suffix(".md.tmp")
        tmp.write_text(text + "\n")
        os.replace(tmp, output)
        print(f"\nwritten to {output}")


if __name__ == "__main__":
    main()
