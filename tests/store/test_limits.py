"""Fleet-wide bounds, enforced by the claim script: max_concurrent, named limits shared by
tag, overlap queue (one fire waits, a second is dropped), and a slot held only while its
lease runs. Real Redis, explicit ``now_ms``."""

from __future__ import annotations

from typing import Any

import pytest
import redis

from cronsvc.fires import fire_id
from cronsvc.keys import Keys
from cronsvc.store.scripts import Scripts

T0 = 1_763_830_000_000
MIN = 60_000
K = Keys()
D1 = "d1d1d1d1d1d1"
SPEC = '{"cron":"* * * * *","timezone":"UTC","jitter":0}'


def line(overlap: str = "allow", attempts: int = 1, most: int = 0, limits: str = "") -> str:
    return f"{D1}|all|0|{overlap}|{attempts}|0|def|||{most or ''}|{limits}"


@pytest.fixture
def s(r: redis.Redis) -> Scripts:
    return Scripts(r)


def setup(s: Scripts, job: str, dues: tuple[int, ...] = (1,), **policy: Any) -> None:
    s.publish(K, [(job, "-", line(**policy), SPEC)], generation=1, now_ms=T0)
    s.plan(K, [(job, D1, T0 + 10 * MIN, [T0 + n * MIN for n in dues])])


def claim(s: Scripts, worker: str = "w", *, now: int, batch: int = 1,
          lease_ms: int = 3_600_000) -> Any:
    """A claim whose lease outlasts the test (unless told otherwise)."""
    return s.claim(K, worker, batch=batch, lease_ms=lease_ms, now_ms=now)


def fid(job: str, n: int) -> str:
    return fire_id(job, T0 + n * MIN)


def test_max_concurrent_lets_n_runs_start_and_skips_the_rest(s: Scripts) -> None:
    setup(s, "a", dues=(1, 2, 3), most=2)
    res = claim(s, "w", batch=10, now=T0 + 3 * MIN)
    assert [c.fire_id for c in res.claimed] == [fid("a", 1), fid("a", 2)]
    assert res.dropped == [(fid("a", 3), "max_concurrent 2 (2 running)")]


def test_a_named_limit_is_shared_by_the_jobs_of_its_tag(s: Scripts) -> None:
    for job in ("a", "b"):
        setup(s, job, limits="db:2")
    setup(s, "c", dues=(1, 2), limits="db:2")
    setup(s, "free")
    res = claim(s, "w", batch=10, now=T0 + MIN)
    assert sorted(c.job for c in res.claimed) == ["a", "b", "free"]
    assert res.dropped == [(fid("c", 1), "limit db (2 running)")]
    # A run ends: its slot is free for the next fire.
    first = next(c for c in res.claimed if c.job == "a")
    s.ack(K, first.fire_id, first.token, first.job, {"status": "ok"})
    assert [c.fire_id for c in claim(s, "w", now=T0 + 2 * MIN).claimed] == [fid("c", 2)]


def test_overlap_queue_keeps_one_fire_waiting_and_starts_it_when_the_run_ends(
        s: Scripts, r: redis.Redis) -> None:
    setup(s, "a", dues=(1, 2, 3), overlap="queue")
    [running] = claim(s, "w", now=T0 + MIN).claimed
    res = claim(s, "w", batch=10, now=T0 + 2 * MIN)
    assert res.claimed == [] and res.dropped == [(fid("a", 2), f"queued behind {running.fire_id}")]
    assert r.zscore(K.queue, fid("a", 2)) is not None  # still queued, waiting
    res = claim(s, "w", batch=10, now=T0 + 3 * MIN)
    assert res.claimed == [] and res.dropped == [
        (fid("a", 3), f"overlap queue: {fid('a', 2)} waits already")]
    s.ack(K, running.fire_id, running.token, "a", {"status": "ok"})
    [waited] = claim(s, "w", now=T0 + 3 * MIN + 10).claimed
    assert waited.fire_id == fid("a", 2)
    assert not r.hexists(K.slots, "w:a")


def test_a_limit_full_with_overlap_queue_waits_instead_of_skipping(s: Scripts) -> None:
    setup(s, "a", limits="gpu:1")
    setup(s, "b", overlap="queue", limits="gpu:1")
    [running] = claim(s, "w", batch=1, now=T0 + MIN).claimed
    assert running.job == "a"
    res = claim(s, "w", batch=10, now=T0 + MIN)
    assert res.dropped == [(fid("b", 1), f"queued behind {running.fire_id}")]
    s.ack(K, running.fire_id, running.token, "a", {"status": "ok"})
    assert [c.fire_id for c in claim(s, "w", now=T0 + MIN + 10).claimed] == [fid("b", 1)]


def test_a_slot_is_held_only_while_its_lease_runs(s: Scripts, r: redis.Redis) -> None:
    setup(s, "a", limits="db:1")
    setup(s, "b", dues=(2,), limits="db:1")
    [held] = claim(s, "w1", lease_ms=1000, now=T0 + MIN).claimed
    r.hset(K.attempts, held.fire_id, 3)  # its last attempt: a lapse makes it dead
    res = claim(s, "w2", batch=10, lease_ms=1000, now=T0 + 2 * MIN)
    assert (held.fire_id, "dead") in res.dropped
    assert [c.fire_id for c in res.claimed] == [fid("b", 2)]  # the slot went with the lease
    assert r.hget(K.slots, "l:db") == fid("b", 2)
