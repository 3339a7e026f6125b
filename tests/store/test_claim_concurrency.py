"""Claims and plans from several real processes at once, and a Redis crash in between."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import redis

from cronsvc.fires import fire_id
from cronsvc.keys import ATTEMPTS_PIN
from cronsvc.process.redis_server import RedisServer
from cronsvc.store.scripts import Scripts
from tests.support import script_procs as procs
from tests.support.paths import ROOT
from tests.support.wait import wait_for

K = procs.K


def server_ms(client: redis.Redis) -> int:
    sec, usec = client.time()
    return int(sec) * 1000 + int(usec) // 1000


def publish(s: Scripts, jobs: list[str], now_ms: int) -> None:
    s.publish(K, [(job, "-", procs.LINE, "{}") for job in jobs], generation=1, now_ms=now_ms)


def run_together(client: redis.Redis, argvs: list[list[str]]) -> None:
    """Start the processes, release them at once, wait for all; fail on any error."""
    client.delete("ready", "go")
    running = [subprocess.Popen([sys.executable, "-m", "tests.support.script_procs", *argv],
                                cwd=ROOT, stderr=subprocess.PIPE) for argv in argvs]
    try:
        wait_for(lambda: client.llen("ready") == len(running), timeout=60,
                 message=f"{len(running)} processes ready")
        client.rpush("go", *[1] * len(running))
        for p in running:
            _, err = p.communicate(timeout=120)
            assert p.returncode == 0, err.decode()
    finally:
        for p in running:
            if p.poll() is None:
                p.kill()
                p.wait()


def state(client: redis.Redis) -> dict[str, object]:
    return {
        "queue": client.zrange(K.queue, 0, -1, withscores=True),
        "working": client.zrange(K.working, 0, -1, withscores=True),
        "attempts": client.hgetall(K.attempts), "claims": client.hgetall(K.claims),
        "watermarks": client.hgetall(K.watermarks), "jobs": client.hgetall(K.jobs),
    }


def expected_fires(jobs: int, fires: int, base: int) -> set[str]:
    return {fire_id(job, due) for job in procs.job_names(jobs) for due in procs.dues(base, fires)}


def test_eight_processes_claim_every_fire_exactly_once(r: redis.Redis, redis_url: str,
                                                       tmp_path: Path) -> None:
    s = Scripts(r)
    base = server_ms(r) - 86_400_000
    jobs, fires = 200, 100  # 20,000 fires, all due
    publish(s, procs.job_names(jobs), base)
    for start in range(0, fires, 25):
        part = procs.dues(base, fires)[start:start + 25]
        s.plan(K, [(job, procs.DIGEST, part[-1], part) for job in procs.job_names(jobs)])
    assert r.zcard(K.queue) == jobs * fires
    outs = [tmp_path / f"claimed{i}.txt" for i in range(8)]
    run_together(r, [["claim", redis_url, str(out)] for out in outs])
    counts = Counter(line for out in outs for line in out.read_text().split())
    assert [fid for fid, n in counts.items() if n > 1] == []
    assert set(counts) == expected_fires(jobs, fires, base)
    assert r.zcard(K.queue) == 0 and r.zcard(K.working) == 0
    assert r.hkeys(K.attempts) == [ATTEMPTS_PIN]
    assert sum(r.llen(K.history(job)) for job in procs.job_names(jobs)) == jobs * fires


def test_two_planners_at_once_queue_each_fire_once(r: redis.Redis, redis_url: str) -> None:
    s = Scripts(r)
    base = 1_900_000_000_000
    jobs, fires = 50, 200
    publish(s, procs.job_names(jobs), base)
    argv = ["plan", redis_url, str(jobs), str(fires), str(base)]
    run_together(r, [argv, argv])
    want = expected_fires(jobs, fires, base)
    assert r.zcard(K.queue) == len(want) and set(r.zrange(K.queue, 0, -1)) == want

    # Run the first ten fires of every job, then both planners go over the same span again.
    res = s.claim(K, "w", batch=10 * jobs, now_ms=base + 10 * procs.STEP)
    assert len(res.claimed) == 10 * jobs
    assert all(s.ack_many(K, [(c.fire_id, c.token, c.job, "{}") for c in res.claimed]))
    run_together(r, [argv, argv])
    done = {c.fire_id for c in res.claimed}
    assert set(r.zrange(K.queue, 0, -1)) == want - done


def test_redis_crash_loses_nothing_acknowledged(fresh_server: Callable[..., RedisServer]) -> None:
    server = fresh_server(appendfsync="always")
    client = redis.Redis.from_url(server.url, decode_responses=True)
    s = Scripts(client)
    base = 1_900_000_000_000
    jobs = procs.job_names(20)
    publish(s, jobs, base)
    s.plan(K, [(job, procs.DIGEST, base + 50_000, procs.dues(base, 50)) for job in jobs])
    first = s.claim(K, "w", batch=300, lease_ms=600_000, now_ms=base + 30_000).claimed
    acked = first[:200]
    assert all(s.ack_many(K, [(c.fire_id, c.token, c.job, "{}") for c in acked]))
    before = state(client)
    server.kill()
    client.close()

    server.start()
    client = redis.Redis.from_url(server.url, decode_responses=True)
    s = Scripts(client)  # a new client after the crash: scripts load again on NOSCRIPT
    assert state(client) == before
    # The 100 claimed but not acked fires come back when their lease expires.
    rest = s.claim(K, "w2", batch=2000, now_ms=base + 700_000).claimed
    again = {c.fire_id for c in rest}
    assert {c.fire_id for c in first[200:]} <= again
    assert again.isdisjoint(c.fire_id for c in acked)
    assert len(again) + len(acked) == 20 * 50
    assert sum(client.llen(K.history(job)) for job in jobs) == 200
    # Replanning after the crash adds nothing back.
    res = s.plan(K, [(job, procs.DIGEST, base + 50_000, procs.dues(base, 50)) for job in jobs])
    assert res.added == 0
    client.close()
