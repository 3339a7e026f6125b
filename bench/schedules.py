"""Runtime schedules at scale: upsert rate, Redis memory per schedule, planner CPU in steady
state, and a burst of schedules due in the same second.

- Upserts: ``schedules`` schedules through ``Client.upsert_schedules`` in batches of 1,000:
  daily crons at random minutes in 20 zones, plus 1 % every minute, each with a small
  payload, while one ``cronsvc planner`` (tick 60 s) runs, as in a fleet (an upsert queues
  fires up to the live planners' next look); it is stopped before memory is measured (it
  would queue fires meanwhile). Reference: a plain pipelined ``HSET`` of the
  same stored lines. Both are timed with no AOF rewrite under way (see
  :func:`rewrites_held`), and each starts with Python's garbage collected: the first
  full collection after the million items are made walks them all (half a second), and
  it fell in the upserts' window, never in the reference's.
- Memory: Redis ``used_memory`` per schedule, with the fires the upserts queued, and
  alone (queue deleted, then restored); and per queued fire.
- Planner CPU: one ``cronsvc planner`` process (tick 60 s) over ``minutes`` of steady
  state with those schedules, as a share of one core (its first tick queues what the
  upserts left to the planners).
- Burst: ``burst`` schedules whose one fire is due at the same second, drained by 2
  worker processes x 100 slots running no-op ``call`` jobs: from that second until the
  queue is empty (the last fire claimed). Reference: the claim script's own ceiling on
  the same fires in the same run (pipelined EVALSHA, batch 100, ``bench/claim.py``).
  Beside it: the CPU redis-server and the workers used until the last claim, per fire,
  and when the last fire was acked (acks trail the claims).

Run: ``.venv/bin/python -m bench.schedules [--schedules 1000000] [--minutes 5]
[--burst 100000]``; ``--minutes 0`` or ``--burst 0`` leaves that part out.
"""

from __future__ import annotations

import gc
import os
import random
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import redis

import cronsvc
from bench import common
from bench.claim import ceiling
from bench.common import Figure, K, Section
from cronsvc.client.client import Client
from cronsvc.schedule.runtime import build
from cronsvc.store.scripts import Scripts
from cronsvc.testing import wait_for

ZONES = ("UTC", "Europe/Berlin", "Europe/London", "Europe/Paris", "Europe/Madrid",
         "Europe/Warsaw", "Europe/Helsinki", "America/New_York", "America/Chicago",
         "America/Denver", "America/Los_Angeles", "America/Sao_Paulo", "Asia/Tokyo",
         "Asia/Shanghai", "Asia/Kolkata", "Asia/Singapore", "Asia/Dubai", "Australia/Sydney",
         "Pacific/Auckland", "Africa/Johannesburg")
BATCH = 1000
WORKERS = 2
CONCURRENCY = 100


def items(n: int, seed: int = 7) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        item: dict[str, Any] = {"id": f"digest:user-{i}", "job": "digest",
                                "timezone": ZONES[i % len(ZONES)], "payload": {"user": i}}
        if i % 100 == 0:
            item["every"] = "1m"
        else:
            item["cron"] = f"{rng.randrange(60)} {rng.randrange(24)} * * *"
        out.append(item)
    return out


def job_file(tmp: Path) -> Path:
    path = tmp / "schedules.yaml"
    path.write_text("jobs:\n  digest:\n    call: bench.jobs:noop\n    retries: 0\n"
                    "worker:\n  history: 10\n")
    return path


def measure(schedules: int = 1_000_000, minutes: float = 5.0, burst: int = 100_000) -> Section:
    section = Section("Runtime schedules")
    rate = 5000.0  # upserts per second, until measured (slower than any measured)
    with common.redis_server() as (server, r):
        path = job_file(Path(server.data_dir))
        if schedules > 0:
            client = Client(server.url, config=str(path))
            client.publish_config()
            # The planner runs the cronsvc this process imported.
            with common.fleet(server.url, {}, str(Path(cronsvc.__file__).parent.parent)) as f:
                f.config.write_text(path.read_text())
                proc = f.start("planner", "planner", "--tick", "60")
                wait_for(lambda: r.zcard(K.planners) >= 1, 120,
                         message="the planner's first tick")
                rate = upserts(section, server, r, client, schedules, proc.pid, f.stop_all)
            section.print()  # what is known so far, should a later part fail
        if minutes > 0:
            planner_cpu(section, server, r, path, minutes)
    if burst > 0:
        with common.redis_server() as (server, r):
            drain(section, server, r, burst, rate)
    return section


def used(r: redis.Redis) -> int:
    """Redis's used_memory once its AOF buffer is written out: while an fsync runs, it holds
    up to two seconds of writes (megabytes after a fast upsert)."""
    wait_for(lambda: int(r.memory_stats()["aof.buffer"]) < 65_536, 30, interval=0.05,
             message="the AOF buffer to be written")
    return int(r.info("memory")["used_memory"])


def rewriting(r: redis.Redis) -> bool:
    info = r.info("persistence")
    return bool(info["aof_rewrite_in_progress"] or info["aof_rewrite_scheduled"])


@contextmanager
def rewrites_held(r: redis.Redis) -> Iterator[None]:
    """No AOF rewrite runs inside the block: it starts once any running one has ended,
    and none starts meanwhile. A rewrite forks the server and writes its whole data set
    out: with a million schedules that takes a core for seconds, and on a small host it
    lands in whichever timed window it falls, the upserts' or the reference's. Both run
    under this, so the ratio compares the two alone."""
    key = "auto-aof-rewrite-percentage"
    old = str(r.config_get(key)[key])
    r.config_set(key, 0)
    try:
        wait_for(lambda: not rewriting(r), 300, interval=0.05,
                 message="the AOF rewrite under way to end")
        yield
    finally:
        r.config_set(key, old)


def upserts(section: Section, server: Any, r: redis.Redis, client: Client, n: int,
            planner: int, then: Callable[[], None]) -> float:
    """Upsert ``n`` schedules and add the rate and memory figures; the rate. ``then``
    (stopping the planner) is called once they are done: memory is measured with no
    planner queueing fires meanwhile."""
    todo = items(n)
    before = used(r)
    with rewrites_held(r):
        gc.collect()  # see the module's docstring
        cpu = common.CpuMeter([os.getpid(), common.server_pid(server), planner]).start()
        t0 = time.perf_counter()
        for i in range(0, n, BATCH):
            client.upsert_schedules(todo[i:i + BATCH])
        upsert_s = time.perf_counter() - t0
        python_cpu, redis_cpu, planner_cpu = (share * cpu.elapsed / n * 1e6
                                              for share in cpu.stop())
    then()
    with_fires = used(r)
    fires = int(r.zcard(K.queue))
    # The queue's share exactly: MEMORY USAGE counts an element's bytes asked for, not
    # those the allocator gave (about 10 bytes more per fire). Put back in pieces, each
    # well within the client's timeout.
    queue = [r.zrange(K.queue, i, i + 49_999, withscores=True) for i in range(0, fires, 50_000)]
    r.delete(K.queue)
    alone = used(r)
    for part in queue:
        r.zadd(K.queue, dict(part))
    # Reference: the same stored lines, pipelined HSET, the same batches.
    now = common.server_ms(r)
    lines = [build(item.pop("id"), now_ms=now, **item).stored()
             for item in items(n)]
    with rewrites_held(r):
        gc.collect()
        cpu = common.CpuMeter([os.getpid(), common.server_pid(server)]).start()
        t0 = time.perf_counter()
        for i in range(0, n, BATCH):
            pipe = r.pipeline(transaction=False)
            pipe.hset("bench:reference", mapping={f"digest:user-{j}": lines[j]
                                                  for j in range(i, min(i + BATCH, n))})
            pipe.execute()
        hset_s = time.perf_counter() - t0
        ref_python, ref_redis = (share * cpu.elapsed / n * 1e6 for share in cpu.stop())
    r.delete("bench:reference")
    rate, reference = n / upsert_s, n / hset_s
    section.figures.append(Figure(
        f"upsert {n:,} schedules", f"{common.rate(rate)} schedules/s ({upsert_s:.0f} s)",
        ">= 0.25 of the reference", f"pipelined HSET of the same lines "
        f"{common.rate(reference)}/s (ratio {rate / reference:.2f})",
        met=rate / reference >= 0.25))
    section.notes.append(
        f"CPU per schedule upserted: this process {python_cpu:.1f} µs, redis-server "
        f"{redis_cpu:.1f} µs (the planner meanwhile {planner_cpu:.1f} µs); per line of the "
        f"HSET reference {ref_python:.1f} µs and "
        f"{ref_redis:.1f} µs")
    per_schedule = (alone - before) / n
    section.figures.append(Figure(
        "Redis memory per schedule", f"{per_schedule:.0f} bytes alone; "
        f"{(with_fires - before) / n:.0f} bytes with its {fires:,} queued fires",
        "<= 250 bytes per schedule", f"{(with_fires - alone) / max(fires, 1):.0f} bytes per "
        "queued fire", met=per_schedule <= 250))
    return rate


def planner_cpu(section: Section, server: Any, r: redis.Redis, path: Path,
                minutes: float) -> None:
    with common.fleet(server.url, {}) as f:
        f.config.write_text(path.read_text())
        proc = f.start("planner", "planner", "--tick", "60")
        wait_for(lambda: r.zcard(K.planners) >= 1, 120, message="the planner's first tick")
        cpu = common.CpuMeter([proc.pid, common.server_pid(server)]).start()
        deadline = time.monotonic() + minutes * 60
        wait_for(lambda: time.monotonic() >= deadline, minutes * 60 + 30, interval=1.0,
                 message="the measuring window")
        planner, redis_share = cpu.stop()
    section.figures.append(Figure(
        "planner CPU, steady state", f"{planner:.1%} of a core over {minutes:g} min",
        "<= 5% of a core", f"redis-server {redis_share:.1%} in the same window",
        met=planner <= 0.05))


def drain(section: Section, server: Any, r: redis.Redis, n: int, rate: float,
          code: str | None = None) -> float:
    """Upsert ``n`` schedules due in one second, let 2 workers drain them; the seconds from
    their due time to the last claim (``code``: the workers run the cronsvc found there,
    see ``common.fleet``)."""
    path = job_file(Path(server.data_dir))
    client = Client(server.url, config=str(path))
    client.publish_config()
    now = common.server_ms(r)
    # A minute boundary the upserts surely end before, at the rate measured above.
    lead_ms = int(2 * n / rate * 1000) + 60_000
    due = ((now + lead_ms) // 60_000 + 1) * 60_000
    t0 = time.perf_counter()
    for i in range(0, n, BATCH):
        client.upsert_schedules([{"id": f"burst:{j}", "job": "digest", "cron": "* * * * *",
                                  "start": due, "max_runs": 1}
                                 for j in range(i, min(i + BATCH, n))])
    setup_s = time.perf_counter() - t0
    queued = [(str(fid), score) for fid, score in r.zrange(K.queue, 0, -1, withscores=True)]
    assert len(queued) == n and all(score == due for _, score in queued), "one fire each"
    # The claim script's ceiling on the same fires, made due now, then put back.
    s = Scripts(r)
    r.script_load(s.sources["claim"].text)  # the ceiling sends EVALSHA only
    r.zadd(K.queue, {fid: now - 1000 for fid, _ in queued})
    top = ceiling(r, s, [fid for fid, _ in queued], CONCURRENCY, with_ack=False)
    for key in (K.working, K.attempts, K.claims):
        r.delete(key)
    r.zadd(K.queue, dict(queued))
    if common.server_ms(r) > due - 5000:
        raise RuntimeError("setup took too long for the burst's due time")
    with common.fleet(server.url, {}, code) as f:
        f.config.write_text(path.read_text())
        for i in range(WORKERS):
            f.worker(f"worker-{i}", "--concurrency", str(CONCURRENCY))
        common.wait_workers(r, WORKERS)
        common.until(r, due - 200, "the burst's due second")
        # CPU from just before the due second: the workers only wait until then.
        cpu = common.CpuMeter([*(p.pid for p in f.procs.values()),
                               common.server_pid(server)]).start()
        common.until(r, due, "the burst's due second")
        wait_for(lambda: r.zcard(K.queue) == 0, 300, interval=0.005,
                 message="the burst to be claimed")
        drained_s = (common.server_ms(r) - due) / 1000
        used = [share * cpu.elapsed for share in cpu.stop()]
        wait_for(lambda: r.zcard(K.working) == 0, 300, interval=0.005,
                 message="the burst to finish")
        finished_s = (common.server_ms(r) - due) / 1000
    per_second = n / drained_s
    section.figures.append(Figure(
        f"burst of {n:,} schedules due in one second", f"{drained_s:.1f} s "
        f"({common.rate(per_second)} fires/s), 2 workers x {CONCURRENCY}; meanwhile "
        f"redis-server {used[-1] / n * 1e6:.1f} µs a fire, the workers "
        f"{sum(used[:-1]) / n * 1e6:.1f} µs; the last acked at {finished_s:.1f} s",
        "<= 2.5 s",
        f"claim-script ceiling on the same fires {common.rate(top)} fires/s "
        f"(ratio {per_second / top:.2f})", met=drained_s <= 2.5))
    section.notes.append(f"{n:,} burst schedules upserted in {setup_s:.0f} s before their "
                         "second; the drain ends when the last fire is claimed")
    return drained_s


if __name__ == "__main__":
    common.cli(__doc__, measure, schedules=1_000_000, minutes=5.0, burst=100_000)
