"""Where in its second a `command` fire of the idle fleet starts late: each second's ten
`command` fires in the order they started, each less the first `call` fire of the same
second (which started as soon as the claim was in: what is left is the commands' own
start path, not the claim's round trip nor a stall of the whole machine).

The idle fleet of ``bench/lag.py`` (4 workers, 10 `call`, 10 async `call` and 10
`command` jobs of ``true`` every second), with ``--compare DIR``: the code in DIR (a copy
of another version, see ``bench/cost.py``) and this tree's in turn, ``--rounds`` each.

Run: ``.venv/bin/python -m bench.command_spread [--compare DIR] [--seconds 30] [--rounds 2]``
"""

from __future__ import annotations

import argparse
import collections
import os
import statistics
from collections.abc import Sequence

from bench import common, lag
from bench.common import Figure, K, Section
from cronsvc.testing import wait_for

PLACES = 10  # `command` fires a second


def spread(seconds: float, code: str | None = None) -> tuple[list[list[int]], list[int]]:
    """Per place in its second (1st to 10th to start), the `command` fires' start less
    the first `call` fire's of the same second (ms); and every `command` fire's lag."""
    jobs = lag.idle_jobs()
    with common.redis_server() as (server, r), common.fleet(
            server.url, jobs, code, planner={"horizon": 60}, worker={"history": 1000}) as f:
        f.start("planner", "planner", "--tick", "5")
        for i in range(lag.WORKERS):
            f.worker(f"worker-{i}", "--concurrency", str(lag.CONCURRENCY))
        common.wait_workers(r, lag.WORKERS)
        wait_for(lambda: r.llen(K.history(next(iter(jobs)))), 60, message="a first run")
        start = (common.server_ms(r) // 1000 + 6) * 1000
        end = start + int(seconds * 1000)
        common.until(r, end, "the window to close")
        wait_for(lambda: common.window_drained(r, end), 300, interval=0.2,
                 message="every fire of the window to finish")
        records = common.histories(r, list(jobs))
    second: dict[int, dict[str, list[int]]] = collections.defaultdict(
        lambda: collections.defaultdict(list))
    for rec in records:
        if start <= rec["scheduled"] < end:
            second[rec["scheduled"]][lag.kind(rec["job"])].append(
                rec["started"] - rec["scheduled"])
    places: list[list[int]] = [[] for _ in range(PLACES)]
    lags: list[int] = []
    for kinds in second.values():
        commands = sorted(kinds["cmd"])
        lags += commands
        if not kinds["call"] or len(commands) != PLACES:
            continue
        first = min(kinds["call"])
        for place, started in enumerate(commands):
            places[place].append(started - first)
    return places, lags


def row(places: list[list[int]], q: float) -> str:
    return " ".join(f"{common.percentile(sorted(p), q):.0f}" for p in places)


def measure(code: str | None, seconds: float, rounds: int) -> Section:
    section = Section("`command` fires by their place in their second"
                      + (f", {code} against this tree" if code else ""))
    load = os.getloadavg()
    for _ in range(rounds):
        for name, where in ((("before", code), ("after", None)) if code else (("now", None),)):
            places, lags = spread(seconds, where)
            p50, p99, top = common.lag_summary(lags)
            gap = statistics.median(b - a for a, b in zip(places[0], places[-1], strict=True))
            section.figures.append(Figure(
                f"{name}: start less the second's first `call`, 1st to 10th, p50 / p90 (ms)",
                f"{row(places, 0.5)} / {row(places, 0.9)}",
                reference=f"their lag p50 {p50:.0f}, p99 {p99:.0f}, max {top:.0f} ms; "
                          f"the 10th less the 1st, p50 {gap:.1f} ms"))
    section.notes.append(
        f"{rounds} windows of {seconds:.0f} s per version, in turn; load average at the start "
        f"{', '.join(f'{x:.2f}' for x in load)}, at the end "
        f"{', '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return section


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--compare", default="", metavar="DIR")
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--rounds", type=int, default=2)
    opts = ap.parse_args(argv)
    measure(opts.compare or None, opts.seconds, opts.rounds).print()


if __name__ == "__main__":
    main()
