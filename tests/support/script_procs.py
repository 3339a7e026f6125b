"""Processes that hammer the scripts, for the concurrency tests.

``python -m tests.support.script_procs claim URL OUT``: claim + ack until nothing is due,
write every claimed fire id to OUT (one per line).
``python -m tests.support.script_procs plan URL JOBS FIRES BASE``: plan FIRES fires of each
of JOBS jobs from BASE, 10 fires per call so two planners interleave.
Both announce themselves on the list ``ready`` and start when ``go`` has an item.
"""

from __future__ import annotations

import sys

import redis

from cronsvc.keys import Keys
from cronsvc.store.scripts import Scripts

K = Keys()
DIGEST = "c0c0c0c0c0c0"
LINE = f"{DIGEST}|all|0|allow|3|0"
STEP = 1000


def job_names(jobs: int) -> list[str]:
    return [f"job{i:04d}" for i in range(jobs)]


def dues(base: int, fires: int) -> list[int]:
    return [base + STEP * (i + 1) for i in range(fires)]


def start_together(client: redis.Redis) -> None:
    client.rpush("ready", 1)
    client.blpop(["go"], timeout=60)


def claim(client: redis.Redis, out: str) -> None:
    s = Scripts(client)
    start_together(client)
    with open(out, "w") as f:
        while True:
            res = s.claim(K, "w", batch=50, lease_ms=600_000)
            if not res.claimed:
                if client.zcard(K.queue) == 0:
                    return
                continue
            f.writelines(c.fire_id + "\n" for c in res.claimed)
            acked = s.ack_many(K, [(c.fire_id, c.token, c.job, '{"status":"ok"}')
                                   for c in res.claimed])
            assert all(acked), "a claim of this process was taken over"


def plan(client: redis.Redis, jobs: int, fires: int, base: int) -> None:
    s = Scripts(client)
    start_together(client)
    wanted = dues(base, fires)
    for start in range(0, fires, 10):
        part = wanted[start:start + 10]
        s.plan(K, [(job, DIGEST, part[-1], part) for job in job_names(jobs)])


def main(argv: list[str]) -> None:
    mode, url, *rest = argv
    client = redis.Redis.from_url(url, decode_responses=True)
    if mode == "claim":
        claim(client, rest[0])
    else:
        plan(client, int(rest[0]), int(rest[1]), int(rest[2]))


if __name__ == "__main__":
    main(sys.argv[1:])
