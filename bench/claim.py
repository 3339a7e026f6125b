"""Claim throughput and queue memory, against a redis-server started here.

1. Claim + ack from one Python process at batch 1, 10 and 100 (one ack call per
   claimed batch), in fires per second.
2. Reference, measured in the same run: the server's ceiling for the same
   scripts, a deep pipeline of pre-encoded EVALSHA calls (claim only, and
   claim + ack), so Python's share of the cost shows as the ratio. An ack costs
   the server about three times what a claim does per fire, so the claim-only
   ratio of a claim + ack loop stays low by construction.
3. Memory per planned fire: INFO used_memory before and after planning
   1,000,000 fires of 10,000 jobs.

Run: ``.venv/bin/python bench/claim.py`` (``--fires N`` to change the workload).
"""

from __future__ import annotations

import argparse
import statistics
import struct
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import redis  # noqa: E402

from bench.jobs import noop  # noqa: E402
from cronsvc.fires import fire_id, job_of  # noqa: E402
from cronsvc.keys import Keys  # noqa: E402
from cronsvc.process.redis_server import RedisServer  # noqa: E402
from cronsvc.ran import PERIOD_MS, RanEntries, period_of  # noqa: E402
from cronsvc.run.outcome import Outcome  # noqa: E402
from cronsvc.store.scripts import (  # noqa: E402
    UNHELD_MS,
    AckCall,
    Scripts,
    ack_call,
    claim_keys,
)
from cronsvc.worker.records import history_json  # noqa: E402

K = Keys()
DIGEST = "0123456789ab"
LINE = f"{DIGEST}|all|0|allow|3|0"
LEASE_MS = 60_000
PLAN_CHUNK = 10_000


def server_ms(r: redis.Redis) -> int:
    sec, usec = r.time()
    return int(sec) * 1000 + int(usec) // 1000


def prepare(r: redis.Redis, s: Scripts, fires: int, jobs: int, base: int,
            distinct: bool = False) -> list[str]:
    """Publish ``jobs`` jobs and plan ``fires`` fires due from ``base`` on (1 s apart per job);
    ``distinct``: each job's policy line with a definition of its own (no two alike)."""
    r.flushall()
    names = [f"job{i:05d}" for i in range(jobs)]
    s.publish(K, [(n, "-", f"{LINE}|{i:012x}" if distinct else LINE, "{}")
                  for i, n in enumerate(names)], generation=1, now_ms=base - 1)
    per_job = fires // jobs
    entries: list[tuple[str, str, int, list[int]]] = []
    size = 0
    for n in names:
        dues = [base + i * 1000 for i in range(per_job)]
        entries.append((n, DIGEST, dues[-1], dues))
        size += per_job
        if size >= PLAN_CHUNK:
            s.plan(K, entries)
            entries, size = [], 0
    if entries:
        s.plan(K, entries)
    return names


def claim_ack(s: Scripts, batch: int, total: int) -> float:
    """Fires per second claimed and acked by this process, the way a worker does it."""
    done = 0
    t0 = time.perf_counter()
    while done < total:
        res = s.claim(K, "bench", batch=batch, lease_ms=LEASE_MS)
        if not res.claimed:
            break
        record = {"status": "ok", "worker": "bench", "duration_ms": 1}
        s.ack_many(K, [(c.fire_id, c.token, c.job, {**record, "fire": c.fire_id})
                       for c in res.claimed])
        done += len(res.claimed)
    elapsed = time.perf_counter() - t0
    assert done == total, f"claimed {done} of {total}"
    return done / elapsed


def primitives(s: Scripts, batch: int, total: int) -> float:
    """Fires per second through a worker's own steps for a no-op call, without its
    threads: each claim of ``batch`` read as the worker reads it; per fire the call, its
    outcome, its history record (the worker's ``history_json``) and its place in the ack
    (``AckCall``, whose record-of-runs and history names are kept from call to call); one
    ack call per claim, as the results thread makes it. No slot, lease, log line nor
    metric: what is left of a worker's CPU per fire beside this loop's is theirs."""
    ran, histories = RanEntries(K), {}
    done, now = 0, time.time
    t0 = time.perf_counter()
    while done < total:
        res = s.claim(K, "bench", batch=batch, lease_ms=LEASE_MS)
        if not res.claimed:
            break
        call = AckCall(K, 100, ran=ran, histories=histories)
        for claim in res.claimed:
            started = int(now() * 1000)
            noop()
            outcome = Outcome("ok", started, 0)
            call.add(claim.fire_id, claim.token, claim.job,
                     history_json(claim, outcome, "bench", 0, "ok"), "", "", started)
        lost = [x for x in s.acked(call) if x is not None]
        assert not lost, lost[:3]
        done += len(res.claimed)
    elapsed = time.perf_counter() - t0
    assert done == total, f"claimed {done} of {total}"
    return done / elapsed


def ack_of(fires: list[str]) -> tuple[list[str], list[object]]:
    """The KEYS and ARGV of the ack of ``fires``, each held with token 1, a short record
    each: what the ceilings ack."""
    return ack_call(K, [(fid, 1, job_of(fid), '{"status":"ok","worker":"bench","duration_ms":1}')
                        for fid in fires], 100)


def pipelined(r: redis.Redis, calls: list[list[object]], per_trip: int) -> float:
    """Seconds to send ``calls``, packed beforehand, ``per_trip`` to a round trip, and read
    every reply (none an error)."""
    conn = r.connection_pool.get_connection()
    packed = [conn.pack_commands(calls[i:i + per_trip]) for i in range(0, len(calls), per_trip)]
    counts = [len(calls[i:i + per_trip]) for i in range(0, len(calls), per_trip)]
    t0 = time.perf_counter()
    for chunks, n in zip(packed, counts, strict=True):
        for chunk in chunks:
            conn._sock.sendall(chunk)  # type: ignore[union-attr]
        for _ in range(n):
            reply = conn.read_response(disable_decoding=True)
            assert not isinstance(reply, Exception), reply
    elapsed = time.perf_counter() - t0
    r.connection_pool.release(conn)
    return elapsed


def ceiling(r: redis.Redis, s: Scripts, fires: list[str], batch: int, with_ack: bool) -> float:
    """Server-bound fires per second: pre-encoded EVALSHA calls, 20 claims per round trip."""
    claim_sha = s._scripts["claim"].sha
    ack_sha = s._scripts["ack"].sha
    keys = claim_keys(K)
    claim_args = [len(keys), *keys, "", "bench", batch, LEASE_MS, batch, UNHELD_MS, "1"]
    calls: list[list[object]] = []
    for i in range(0, len(fires), batch):
        calls.append(["EVALSHA", claim_sha, *claim_args])
        if with_ack:  # one ack call for the batch, as a worker's results thread makes
            keys, args = ack_of(fires[i:i + batch])
            calls.append(["EVALSHA", ack_sha, len(keys), *keys, *args])
    elapsed = pipelined(r, calls, 20 * (2 if with_ack else 1))
    claimed = len(fires) - r.zcard(K.queue)
    assert claimed == len(fires), f"ceiling run claimed {claimed} of {len(fires)}"
    return len(fires) / elapsed


def plain_commands(r: redis.Redis, fires: list[str], batch: int) -> float:
    """The writes a claim + ack makes, as plain commands instead of scripts, pipelined as
    :func:`ceiling` pipelines the scripts: the server's cost of the commands alone, no Lua.
    Per batch, the claim's: the due fires read, their attempts read, the queue's ranks
    removed, the leases, attempts and claims written (one command each); the ack's: the
    attempts read, per fire a ZREM of its lease, an LPUSH of its record to its job's history
    and an APPEND of its entry to the record of runs (each fire of another job, as the
    ceiling's), then the attempts and claims removed. Fires per second."""
    now = server_ms(r)
    deadline = now + LEASE_MS
    calls: list[list[object]] = []
    for i in range(0, len(fires), batch):
        chunk = fires[i:i + batch]
        keys, args = ack_of(chunk)
        calls += [
            ["ZRANGEBYSCORE", K.queue, "-inf", now, "LIMIT", "0", batch],
            ["HMGET", K.attempts, *chunk],
            ["ZREMRANGEBYRANK", K.queue, "0", len(chunk) - 1],
            ["ZADD", K.working, *(x for fid in chunk for x in (deadline, fid))],
            ["HSET", K.attempts, *(x for fid in chunk for x in (fid, 1))],
            ["HSET", K.claims, *(x for fid in chunk for x in (
                fid, f'{{"worker":"bench","token":1,"due":{now},"claimed_at":{now}}}'))],
            ["HMGET", K.attempts, *chunk]]
        for f, fid in enumerate(chunk, 1):
            calls += [["ZREM", K.working, fid],
                      ["LPUSH", keys[6 + 2 * f], args[4 * f + 3]],  # KEYS[7 + 2f]: history
                      ["APPEND", keys[7 + 2 * f], args[4 * f + 4]]]  # ARGV[4f + 5]: entry
        calls += [["HDEL", K.attempts, *chunk], ["HDEL", K.claims, *chunk]]
    elapsed = pipelined(r, calls, 400)
    assert r.zcard(K.queue) == 0 and r.zcard(K.working) == 0, "the plain commands left fires"
    return len(fires) / elapsed


def ack_cost(r: redis.Redis, s: Scripts, fires: int = 20_000, jobs: int = 1000,
             rounds: int = 3) -> tuple[float, float]:
    """Time per acked fire in µs, the median of ack calls of 100 fires timed one at a time,
    with the record of runs (cronsvc/ran.py) and with its entries left out. The calls of the
    two alternate one by one, so a busy neighbour slows both alike. A batch's fires are each
    of another job: an APPEND per fire, the most the record costs."""
    digest = r.script_load(s.sources["ack"].text)
    base = server_ms(r) - 86_400_000
    record = '{"status":"ok","worker":"bench","duration_ms":1}'
    took: dict[bool, list[float]] = {True: [], False: []}
    for n in range(rounds):
        r.flushall()
        calls = []
        pipe = r.pipeline(transaction=False)
        for i in range(0, fires, 100):
            for with_record in (True, False):
                items = [(f"job{j % jobs:05d}@{base + (2 * j + with_record) * 1000 + n}", 1,
                          f"job{j % jobs:05d}", record) for j in range(i, i + 100)]
                for fid, *_ in items:
                    pipe.zadd(K.working, {fid: base + 86_400_000 * 2})
                    pipe.hset(K.attempts, fid, 1)
                keys, args = ack_call(K, items, 100)
                if not with_record:
                    args = ["" if isinstance(a, bytes) else a for a in args]
                calls.append((with_record, keys, args))
        pipe.execute()
        for with_record, keys, args in calls:
            t0 = time.perf_counter()
            reply = r.evalsha(digest, len(keys), *keys, *args)
            took[with_record].append((time.perf_counter() - t0) * 1e6 / 100)
            assert reply == [], reply  # the fires not acked: none
    return statistics.median(took[True]), statistics.median(took[False])


def backfill_cost(r: redis.Redis, s: Scripts, calls: int = 200) -> tuple[float, float, float]:
    """Server-blocking time of one backfill check (lua/backfill-6+.lua) against a record of
    runs holding a whole period of a minutely job (17,896 entries, 70 KB), in ms, medians
    of ``calls``: asked about 1 fire, as a backfill feeding one at a time does per fire,
    and about 1,000 (a plan); and, the reference, a GET of the same record string. The
    fires asked about are not in it, the longest search."""
    r.flushall()
    period = period_of(server_ms(r))
    start = period * PERIOD_MS
    dues = list(range(start, start + PERIOD_MS, 60_000))
    r.set(K.ran("m", period), b"".join(struct.pack(">I", d - start) for d in dues[:-1000]))
    asked = [fire_id("m", d) for d in dues[-1000:]]

    def median_ms(call: Callable[[], object]) -> float:
        took = []
        for _ in range(calls):
            t0 = time.perf_counter()
            call()
            took.append((time.perf_counter() - t0) * 1000)
        return statistics.median(took)

    return (median_ms(lambda: s.backfill(K, "m", "m", asked[-1:], queue=False)),
            median_ms(lambda: s.backfill(K, "m", "m", asked, queue=False)),
            median_ms(lambda: r.execute_command("GET", K.ran("m", period), NEVER_DECODE=True)))


def memory_per_fire(r: redis.Redis, s: Scripts, fires: int, jobs: int) -> float:
    r.flushall()
    before = int(r.info("memory")["used_memory"])
    prepare(r, s, fires, jobs, server_ms(r) + 3_600_000)
    after = int(r.info("memory")["used_memory"])
    assert r.zcard(K.queue) == fires
    return (after - before) / fires


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fires", type=int, default=200_000, help="fires per run at batch 100")
    ap.add_argument("--memory-fires", type=int, default=1_000_000)
    opts = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp, RedisServer(tmp) as server:
        r = redis.Redis.from_url(server.url)
        s = Scripts(r)
        print(f"redis-server {r.info('server')['redis_version']} on port {server.port}, "
              f"AOF appendfsync {server.appendfsync}")
        results: dict[int, float] = {}
        for batch, share in ((1, 20), (10, 4), (100, 1)):
            total = opts.fires // share
            prepare(r, s, total, 1000, server_ms(r) - 86_400_000)
            results[batch] = claim_ack(s, batch, total)
        fires = opts.fires
        ceilings = {}
        for with_ack in (False, True):
            prepare(r, s, fires, 1000, server_ms(r) - 86_400_000)
            queued = [m.decode() for m in r.zrange(K.queue, 0, -1)]
            ceilings[with_ack] = ceiling(r, s, queued, 100, with_ack)
        print(f"ceiling (pipelined EVALSHA, batch 100): claim only {ceilings[False]:,.0f} "
              f"fires/s, claim + ack {ceilings[True]:,.0f} fires/s")
        for batch, rate in results.items():
            print(f"batch {batch:>3}: {rate:>9,.0f} fires/s claimed + acked   "
                  f"ratio {rate / ceilings[False]:.2f} of claim-only ceiling, "
                  f"{rate / ceilings[True]:.2f} of claim+ack ceiling")
        per_fire = memory_per_fire(r, s, opts.memory_fires, 10_000)
        print(f"memory: {per_fire:.0f} bytes per planned fire "
              f"({opts.memory_fires:,} fires of 10,000 jobs)")
        # The loop claims AND acks, so its like-for-like reference is the claim + ack ceiling.
        checks = [
            ("batch 100 >= 30,000 fires/s", results[100] >= 30_000),
            ("batch 100 >= 0.4 of the claim + ack ceiling", results[100] >= 0.4 * ceilings[True]),
            ("<= 150 bytes per planned fire", per_fire <= 150),
        ]
        for name, ok in checks:
            print(f"target {name}: {'met' if ok else 'MISSED'}")


if __name__ == "__main__":
    main()
