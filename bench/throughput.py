"""Dispatch throughput: no-op `call` fires claimed, run and acked per second by 2
worker processes draining a queue of due fires.

The rate is the slope while the queue drains from 90 % to 10 % of its fires, so
the workers' start-up is not counted. Every fire must end with one ``ok``
history record.

Reference, measured in the same run on the same server: the ceiling for the same
claim script (and for claim + ack), pipelined pre-encoded EVALSHA calls at the
workers' batch size, from ``bench/claim.py``.

Run: ``.venv/bin/python -m bench.throughput [--fires 100000]``
"""

from __future__ import annotations

import redis

from bench import common
from bench.claim import ack_cost, backfill_cost, ceiling, prepare
from bench.common import Figure, K, Section
from cronsvc.store.scripts import Scripts
from cronsvc.testing import wait_for

WORKERS = 2
CONCURRENCY = 100  # also the claim batch of the ceiling
JOBS = 1000
DAY_MS = 86_400_000


def drain_rate(r: redis.Redis, total: int, timeout: float) -> tuple[float, float]:
    """Fires per second while the backlog falls from 90 % to 10 %, and seconds to drain."""

    def left() -> int:
        pipe = r.pipeline(transaction=False)
        pipe.zcard(K.queue)
        pipe.zcard(K.working)
        return int(sum(pipe.execute()))

    return common.drained(left, total, timeout)


def measure(fires: int = 100_000) -> Section:
    section = Section("Dispatch throughput (2 worker processes, no-op `call` jobs)")
    jobs = {f"job{i:05d}": common.noop_job("0 0 1 1 *", catch_up="all") for i in range(JOBS)}
    with common.redis_server() as (server, r):
        s = Scripts(r)
        # Fires of these job names, published with the policy bench/claim.py uses, all due.
        prepare(r, s, fires, JOBS, common.server_ms(r) - DAY_MS)
        with common.fleet(server.url, jobs, worker={"history": fires // JOBS + 10}) as f:
            for i in range(WORKERS):
                f.worker(f"worker-{i}", "--concurrency", str(CONCURRENCY))
            wait_for(lambda: r.zcard(K.working) or r.zcard(K.queue) < fires, 60,
                     message="a first claim")
            cpu = common.CpuMeter([*(p.pid for p in f.procs.values()), common.server_pid(server)])
            cpu.start()
            per_second, seconds = drain_rate(r, fires, 600)
            cpu.stop()
        records = common.histories(r, list(jobs))
        ok = {rec["fire"] for rec in records if rec["status"] == "ok"}
        runs = sum(rec["status"] == "ok" for rec in records)
        ceilings = {}
        for with_ack in (False, True):
            prepare(r, s, fires, JOBS, common.server_ms(r) - DAY_MS)
            queued = [str(fid) for fid in r.zrange(K.queue, 0, -1)]
            ceilings[with_ack] = ceiling(r, s, queued, CONCURRENCY, with_ack)
        with_record, without = ack_cost(r, s)
        one, plan, get = backfill_cost(r, s)
    share = per_second / ceilings[False]
    section.figures.append(Figure(
        "dispatch throughput", f"{common.rate(per_second)} fires/s",
        ">= 20,000 fires/s and >= 0.25 of the claim ceiling",
        f"claim-script ceiling {common.rate(ceilings[False])} fires/s (ratio {share:.2f}); "
        f"claim + ack ceiling {common.rate(ceilings[True])} fires/s "
        f"(ratio {per_second / ceilings[True]:.2f})",
        per_second >= 20_000 and share >= 0.25))
    section.figures.append(Figure(
        "ack time per fire (a call of 100, round trip)", f"{with_record:.1f} µs",
        reference=f"{without:.1f} µs without the record of runs ({with_record - without:+.1f} "
                  "µs: one APPEND per fire); medians of 600 ack calls each, alternating"))
    section.figures.append(Figure(
        "backfill check of 1 fire against a minutely job's 70 KB record period",
        f"{one:.2f} ms", reference=f"GET of that record: {get:.2f} ms; 1,000 fires at once: "
                                   f"{plan:.2f} ms; medians of 200 calls"))
    *workers, redis_cpu = cpu.per_process
    section.notes.append(
        f"{fires:,} fires of {JOBS:,} jobs queued due, then {WORKERS} workers --concurrency "
        f"{CONCURRENCY}; drained in {seconds:.1f} s; CPU (share of one core): workers "
        f"{', '.join(f'{c:.0%}' for c in workers)}, redis-server {redis_cpu:.0%}.")
    problems = fires - len(ok), runs - len(ok)
    section.notes.append(f"history: {len(ok):,} fires ok, {problems[0]} without an ok record, "
                         f"{problems[1]} run twice" + ("" if problems == (0, 0)
                                                       else ": CORRECTNESS PROBLEM"))
    return section


if __name__ == "__main__":
    common.cli(__doc__, measure, fires=100_000)
