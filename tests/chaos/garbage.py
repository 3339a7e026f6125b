"""Garbage written straight into every key a fleet reads, as a hand, a bug or another program
might: members that are not fire ids, values that are not what their key holds.

Only names no job of the chaos files has are used as fire ids and schedule ids (``ghost``,
``marker``), and no well-formed fire or definition of the fleet is overwritten, so every fire
of the well-formed jobs must still run once, on time; the one exception is the history of a
real job, whose readers must skip the lines they cannot read.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import redis

from cronsvc.keys import Keys


def bad_fire_ids(now_ms: int) -> list[bytes]:
    """Queue and working members that are not fire ids, or name a time no fire has."""
    return [s.encode() if isinstance(s, str) else s for s in (
        "marker", "marker@abc", f"marker@{now_ms}\nx", f"@{now_ms}",
        "marker@99999999999999999999999", f"marker@{now_ms}#", f"marker@{now_ms}!",
        f"marker@-{now_ms}", f"mar ker@{now_ms}", f"marker@{now_ms}!a|b", "x" * 5000,
        b"\xff\xfe@" + str(now_ms).encode(), "marker@" + str(now_ms) + "\x1b[2J",
    )]


@dataclass
class Planted:
    """What was written: the members of the queue and working set that must be set aside."""

    queue: list[bytes] = field(default_factory=list)
    working: list[bytes] = field(default_factory=list)


def plant(r: redis.Redis, k: Keys, now_ms: int, job: str, worker: str) -> Planted:
    """Write garbage into every key the fleet reads; ``job`` is a real job (its history gets
    lines that are not records) and ``worker`` a live worker (its presence info gets some)."""
    planted = Planted()
    ghosts = {f"ghost{i}@{now_ms}" for i in range(4)}
    pipe = r.pipeline(transaction=False)
    for member in bad_fire_ids(now_ms):
        pipe.zadd(k.queue, {member: now_ms})
        planted.queue.append(member)
    for member in bad_fire_ids(now_ms - 7)[:6]:
        pipe.zadd(k.working, {member: now_ms - 60_000})  # a lease that lapsed long ago
        planted.working.append(member)
    # Well-formed fire ids of jobs that are not, with a policy line, attempts, claim and
    # payload that are not what those keys hold.
    for i, fid in enumerate(sorted(ghosts)):
        pipe.zadd(k.queue if i % 2 else k.working, {fid: now_ms - 60_000})
    pipe.hset(k.jobs, mapping={"ghost0": "garbage line", "ghost1": "|" * 20,
                               "ghost2": b"\xff\x00|all|x", "ghost3": "d|all|x|y|z|1|"})
    pipe.hset(k.attempts, mapping={fid: "abc" for fid in ghosts})
    pipe.hset(k.claims, mapping={fid: "{not json" for fid in ghosts})
    pipe.hset(k.payloads, mapping={fid: b"\xff not json" for fid in ghosts})
    pipe.hset(k.cancels, mapping={fid: "\x00" for fid in ghosts})
    pipe.hset(k.running, mapping={"ghost0": "not a fire", "ghost1": f"ghost1@{now_ms}"})
    pipe.hset(k.slots, mapping={"o:ghost0": "a|b|", "l:ghost": "\xff", "w:ghost1": "x"})
    pipe.hset(k.paused, mapping={"ghost0": "{bad json", "ghost1": "[]"})
    pipe.hset(k.specs, mapping={"ghost0": "not json", "ghost1": '{"cron": 5}'})
    pipe.hset(k.failing, mapping={"ghost0": "many"})
    # Runtime schedules: a line that is not one, one whose schedule is not JSON, one of a
    # job that does not exist; each due to be planned now, with a fire of it queued.
    pipe.hset(k.schedules, mapping={
        "ghost:1": "garbage line",
        "ghost:2": f"1|1|1|cli|{job}|0||||{{bad json|",
        "ghost:3": '1|1|1|cli|ghost0|0||||{"every_ms":1000,"anchor_ms":0}|',
        "ghost:4": b"\xff\xfe",
    })
    pipe.zadd(k.schedule_marks, {"ghost:1": 0, "ghost:2": 0, "ghost:3": 0, "ghost:4": "-inf",
                                 b"\xff": 0, "ghost:none": 0})
    pipe.zadd(k.queue, {f"{job}@{now_ms}!ghost:1": now_ms, f"{job}@{now_ms}!ghost:2": now_ms})
    pipe.hset(k.watermarks, mapping={"ghost0": "abc", "ghost1": "-1e99"})
    pipe.zadd(k.dead, {"marker": now_ms, f"ghost0@{now_ms}": now_ms})
    # Lines of history, events and outbox that are not records.
    for key in (k.history(job), k.history("ghost0"), k.events, k.outbox):
        pipe.lpush(key, "garbage", "{}", "[1,2]", '{"fire": 5, "status": []}', b"\xff\xfe",
                   '{"event": "failed", "job": "ghost0"}', '"text"', "null")
    # Presence: a member that is not a worker, info that is not JSON, a live worker's too.
    pipe.zadd(k.workers, {"ghost-worker": now_ms, b"\xff": now_ms})
    pipe.hset(k.worker_info, mapping={"ghost-worker": "{bad", worker: "[]"})
    pipe.zadd(k.planners, {"ghost-planner": now_ms})
    pipe.hset(k.planner_info, mapping={"ghost-planner": "not json"})
    pipe.execute()
    return planted
