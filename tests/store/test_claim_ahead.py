"""``lua/claim-18.lua`` with ``ahead_ms``: fires due within it are taken before their due
time only when nothing judged at that time could hold them back; any other waits for the
claim at its due time. Against a real Redis, with explicit ``now_ms``."""

from __future__ import annotations

import json
from typing import Any

import pytest
import redis

from cronsvc.fires import fire_id
from cronsvc.keys import Keys
from cronsvc.store.scripts import Scripts

T0 = 1_763_830_000_000
SEC = 1000
K = Keys()
D1 = "d1d1d1d1d1d1"
SPEC = '{"cron":"* * * * * *","timezone":"UTC","jitter":0}'


def line(catch_up: str = "all", overlap: str = "allow", paused: int = 0) -> str:
    return f"{D1}|{catch_up}|0|{overlap}|3|{paused}"


@pytest.fixture
def s(r: redis.Redis) -> Scripts:
    return Scripts(r)


def setup_job(s: Scripts, job: str = "a", dues: tuple[int, ...] = (1, 2), **policy: str | int
              ) -> list[str]:
    """Job ``job`` published with ``policy``, its fires due ``dues`` seconds after T0."""
    s.publish(K, [(job, "-", line(**policy), SPEC)],  # type: ignore[arg-type]
              generation=1, now_ms=T0)
    s.plan(K, [(job, D1, T0 + 10 * SEC, [T0 + d * SEC for d in dues])])
    return [fire_id(job, T0 + d * SEC) for d in dues]


def test_fires_due_within_ahead_are_taken_after_the_due_ones(s: Scripts, r: redis.Redis
                                                               ) -> None:
    first, second = setup_job(s)
    # 10 ms before the first: taken with 20 ms ahead, not with 5 (nor without).
    for ahead in (0, 5):
        res = s.claim(K, "w", batch=10, now_ms=T0 + SEC - 10, ahead_ms=ahead)
        assert (res.claimed, res.next_ms) == ([], T0 + SEC)
    res = s.claim(K, "w", batch=10, now_ms=T0 + SEC - 10, ahead_ms=20)
    assert [(c.fire_id, c.due_ms, c.token) for c in res.claimed] == [(first, T0 + SEC, 1)]
    assert (res.now_ms, res.next_ms) == (T0 + SEC - 10, T0 + 2 * SEC)
    assert json.loads(r.hget(K.claims, first))["claimed_at"] == T0 + SEC - 10  # type: ignore[arg-type]
    assert r.zscore(K.working, first) == T0 + SEC - 10 + 30_000  # its lease from the claim
    assert r.zrange(K.queue, 0, -1) == [second]


def test_the_due_ones_come_first_and_fill_the_batch_first(s: Scripts, r: redis.Redis) -> None:
    first, second = setup_job(s, dues=(1, 2))
    res = s.claim(K, "w", batch=1, now_ms=T0 + 2 * SEC - 10, ahead_ms=20)
    assert [c.fire_id for c in res.claimed] == [first]
    res = s.claim(K, "w", batch=5, now_ms=T0 + 2 * SEC - 10, ahead_ms=20)
    assert [c.fire_id for c in res.claimed] == [second]
    assert r.zcard(K.queue) == 0


@pytest.mark.parametrize("policy", [{"paused": 1}, {"overlap": "forbid"},
                                    {"overlap": "queue"}, {"overlap": "replace"}])
def test_a_fire_some_judgement_could_hold_back_waits_for_its_due_time(
    s: Scripts, r: redis.Redis, policy: dict[str, Any]
) -> None:
    first, _ = setup_job(s, **policy)
    res = s.claim(K, "w", batch=10, now_ms=T0 + SEC - 10, ahead_ms=20)
    # Neither taken nor judged: queued still, and the claim is asked back at its due time.
    assert (res.claimed, res.dropped, res.next_ms) == ([], [], T0 + SEC)
    assert r.zscore(K.queue, first) == T0 + SEC
    res = s.claim(K, "w", batch=10, now_ms=T0 + SEC, ahead_ms=20)
    assert [c.fire_id for c in res.claimed] + [d[0] for d in res.dropped] == [first]


def test_a_fire_tried_before_or_queued_at_another_time_waits(s: Scripts, r: redis.Redis
                                                              ) -> None:
    first, second = setup_job(s)
    r.hset(K.attempts, first, 0)  # queued again by hand (a retry of a dead fire)
    r.zadd(K.queue, {second: T0 + SEC + 5})  # queued at a time other than its id's
    res = s.claim(K, "w", batch=10, now_ms=T0 + SEC - 10, ahead_ms=20)
    assert (res.claimed, res.next_ms) == ([], T0 + SEC)
    assert r.zcard(K.queue) == 2


def test_nothing_is_taken_ahead_while_a_due_fire_is_left_queued(s: Scripts, r: redis.Redis
                                                                 ) -> None:
    [other] = setup_job(s, "b", dues=(1,))
    [mine] = setup_job(s, "a", dues=(2,))
    held = K.held("mine")
    r.hset(held, "a", "")  # this worker holds a's definition, not b's
    res = s.claim(K, "w", batch=10, now_ms=T0 + 2 * SEC - 10, ahead_ms=20, held=held)
    assert res.claimed == [] and r.zcard(K.queue) == 2
    r.zrem(K.queue, other)
    res = s.claim(K, "w", batch=10, now_ms=T0 + 2 * SEC - 10, ahead_ms=20, held=held)
    assert [c.fire_id for c in res.claimed] == [mine]


def test_a_fire_of_a_definition_not_held_waits(s: Scripts, r: redis.Redis) -> None:
    first, _ = setup_job(s)
    held = K.held("other")
    r.hset(held, "x", "")
    res = s.claim(K, "w", batch=10, now_ms=T0 + SEC - 10, ahead_ms=20, held=held)
    assert (res.claimed, res.dropped, res.next_ms) == ([], [], T0 + SEC)


def test_catch_up_latest_judges_the_due_fires_without_the_ones_taken_ahead(
    s: Scripts, r: redis.Redis
) -> None:
    first, second, third = setup_job(s, dues=(1, 2, 3), catch_up="latest")
    # The first is due, the second 10 ms on: the first is the newest due, it runs.
    res = s.claim(K, "w", batch=10, now_ms=T0 + 2 * SEC - 10, ahead_ms=20)
    assert [c.fire_id for c in res.claimed] == [first, second] and res.dropped == []
    assert r.zrange(K.queue, 0, -1) == [third]


def test_a_fire_of_a_runtime_schedule_waits_for_its_due_time(s: Scripts, r: redis.Redis
                                                              ) -> None:
    # A delete or a change of its schedule before its due time must find it queued.
    setup_job(s, dues=())
    sid = "nightly"
    r.hset(K.schedules, sid, '1|1|1|cli|a|0||||{"every_ms":1000,"anchor_ms":0}|')
    fid = f"{fire_id('a', T0 + SEC)}!{sid}"
    r.zadd(K.queue, {fid: T0 + SEC})
    res = s.claim(K, "w", batch=10, now_ms=T0 + SEC - 10, ahead_ms=20)
    assert (res.claimed, res.dropped, res.next_ms) == ([], [], T0 + SEC)
    assert r.zscore(K.queue, fid) == T0 + SEC


def test_a_publish_does_not_plan_again_a_fire_claimed_ahead(s: Scripts, r: redis.Redis
                                                             ) -> None:
    """A fire claimed ahead is out of the queue but not yet due. A publish that changes its
    job moves the watermark to now, and the planner plans the new definition's fires after
    it: without a floor, it would queue that fire again, and once the first run was acked
    (its attempt gone) the fire would run a second time as attempt 1."""
    first, second = setup_job(s, dues=(1, 2))
    res = s.claim(K, "w", batch=10, now_ms=T0 + SEC - 10, ahead_ms=20)
    assert [c.fire_id for c in res.claimed] == [first]
    d2 = "d2d2d2d2d2d2"
    s.publish(K, [("a", D1, line().replace(D1, d2), SPEC)],  # type: ignore[arg-type]
              [], [("a", "replaced", [second], "default")], generation=2,
              now_ms=T0 + SEC - 5)
    assert int(r.hget(K.watermarks, "a")) == T0 + SEC  # type: ignore[arg-type]
    s.plan(K, [("a", d2, T0 + 10 * SEC, [T0 + d * SEC for d in (1, 2, 3)])])
    assert r.zrange(K.queue, 0, -1) == [second, fire_id("a", T0 + 3 * SEC)]
    assert r.zscore(K.working, first) is not None  # still held by its claim


def test_a_prefetch_takes_fires_due_ahead_up_to_its_count(s: Scripts, r: redis.Redis) -> None:
    # batch 0: a worker with no free slot; the fires it takes wait in it for one.
    fids = [setup_job(s, job, dues=(1,))[0] for job in ("a", "b", "c")]
    res = s.claim(K, "w", batch=0, now_ms=T0 + SEC - 10, ahead_ms=20, prefetch=2)
    assert [(c.fire_id, c.token) for c in res.claimed] == [(fids[0], 1), (fids[1], 1)]
    assert r.zrange(K.queue, 0, -1) == [fids[2]]
    assert res.next_ms == T0 + SEC
    # Without a count, or without ahead_ms, a claim of 0 takes nothing.
    for kw in ({"ahead_ms": 20}, {"ahead_ms": 0, "prefetch": 5}):
        res = s.claim(K, "w", batch=0, now_ms=T0 + SEC - 10, **kw)  # type: ignore[arg-type]
        assert res.claimed == []
    assert r.zrange(K.queue, 0, -1) == [fids[2]]


def test_a_prefetch_leaves_due_fires_and_lapsed_leases_to_a_worker_with_a_free_slot(
    s: Scripts, r: redis.Redis
) -> None:
    [due] = setup_job(s, "a", dues=(1,))
    [later] = setup_job(s, "b", dues=(2,))
    # A fire is due: nothing is taken ahead of it.
    res = s.claim(K, "w", batch=0, now_ms=T0 + 2 * SEC - 10, ahead_ms=20, prefetch=5)
    assert (res.claimed, res.next_ms) == ([], T0 + SEC)
    assert r.zrange(K.queue, 0, -1) == [due, later]
    # Claimed with a short lease, which lapses: a prefetch takes the fire ahead only.
    res = s.claim(K, "w1", batch=1, now_ms=T0 + SEC, lease_ms=100)
    assert [c.fire_id for c in res.claimed] == [due]
    res = s.claim(K, "w2", batch=0, now_ms=T0 + 2 * SEC - 10, ahead_ms=20, prefetch=5)
    assert [c.fire_id for c in res.claimed] == [later]
    assert r.zscore(K.working, due) == T0 + SEC + 100 and r.hget(K.attempts, due) == "1"
    assert json.loads(r.hget(K.claims, due))["worker"] == "w1"  # type: ignore[arg-type]
