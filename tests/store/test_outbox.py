"""The outbox: each script that records an outcome pushes the events its job wants in the
same call, counts failures in a row, pauses the job after ``pause_after``, and a success
ends the episode (``recovered``). Real Redis, explicit ``now_ms``."""

from __future__ import annotations

import json
from typing import Any

import pytest
import redis

from cronsvc.fires import fire_id
from cronsvc.keys import Keys
from cronsvc.policy import notify_mask
from cronsvc.store.scripts import Scripts

T0 = 1_763_830_000_000
MIN = 60_000
K = Keys()
D1 = "d1d1d1d1d1d1"
SPEC = '{"cron":"* * * * *","timezone":"UTC","jitter":0}'
ALL = notify_mask(["failed", "dead", "missed", "skipped", "recovered", "lease_lost"])


def line(catch_up: str = "all", deadline: int = 0, overlap: str = "allow", attempts: int = 1,
         mask: str = ALL, pause_after: int = 0) -> str:
    return (f"{D1}|{catch_up}|{deadline}|{overlap}|{attempts}|0|def|{mask}|"
            f"{pause_after or ''}")


@pytest.fixture
def s(r: redis.Redis) -> Scripts:
    return Scripts(r)


def setup(s: Scripts, job: str = "a", dues: tuple[int, ...] = (1,), **policy: Any) -> None:
    s.publish(K, [(job, "-", line(**policy), SPEC)], generation=1, now_ms=T0)
    s.plan(K, [(job, D1, T0 + 10 * MIN, [T0 + n * MIN for n in dues])])


def outbox(r: redis.Redis) -> list[dict[str, Any]]:
    """The outbox, oldest first."""
    return [json.loads(x) for x in reversed(r.lrange(K.outbox, 0, -1))]


def fail(s: Scripts, claim: Any, attempts: int = 1, mask: str = ALL, pause_after: int = 0,
         now: int = T0 + MIN) -> str:
    record = {"fire": claim.fire_id, "job": claim.job, "status": "failed", "reason": "exit 3",
              "exit_code": 3, "output": "disk full"}
    return s.fail(K, claim.fire_id, claim.token, claim.job, record, 100, attempts, now + 1000,
                  notify=mask, pause_after=pause_after, now_ms=now).verdict


def test_a_failed_attempt_then_its_death_are_told_with_the_error(s: Scripts,
                                                                 r: redis.Redis) -> None:
    setup(s, attempts=2)
    [c] = s.claim(K, "w", now_ms=T0 + MIN).claimed
    assert fail(s, c, attempts=2) == "retry"
    [c2] = s.claim(K, "w", now_ms=T0 + MIN + 1000).claimed
    assert fail(s, c2, attempts=2, now=T0 + MIN + 1000) == "dead"
    fid = fire_id("a", T0 + MIN)
    assert [(e["event"], e["fire"], e["attempt"]) for e in outbox(r)] == [
        ("failed", fid, 1), ("dead", fid, 2)]
    assert outbox(r)[1]["output"] == "disk full" and outbox(r)[1]["exit_code"] == 3
    assert r.hget(K.failing, "a") == "1"  # one fire failed for good


def test_a_job_that_wants_nothing_leaves_the_outbox_empty(s: Scripts, r: redis.Redis) -> None:
    setup(s, mask="")
    [c] = s.claim(K, "w", now_ms=T0 + MIN).claimed
    assert fail(s, c, mask="") == "dead"
    assert outbox(r) == [] and not r.exists(K.failing)


def test_only_the_events_a_job_wants_are_pushed(s: Scripts, r: redis.Redis) -> None:
    setup(s, mask=notify_mask(["dead"]), attempts=2)
    [c] = s.claim(K, "w", now_ms=T0 + MIN).claimed
    fail(s, c, attempts=2, mask=notify_mask(["dead"]))
    assert outbox(r) == []


def test_a_success_after_failures_is_recovered_once(s: Scripts, r: redis.Redis) -> None:
    setup(s, dues=(1, 2, 3))
    [c] = s.claim(K, "w", now_ms=T0 + MIN).claimed
    fail(s, c)
    [c2] = s.claim(K, "w", now_ms=T0 + 2 * MIN).claimed
    s.ack(K, c2.fire_id, c2.token, c2.job, {"status": "ok"})
    [c3] = s.claim(K, "w", now_ms=T0 + 3 * MIN).claimed
    s.ack(K, c3.fire_id, c3.token, c3.job, {"status": "ok"})
    events = outbox(r)
    assert [e["event"] for e in events] == ["dead", "recovered"]
    assert events[1]["fire"] == c2.fire_id and events[1]["count"] == 1
    assert not r.hexists(K.failing, "a")


def test_a_success_in_a_batch_after_a_lost_lease_recovers_its_own_job(
        s: Scripts, r: redis.Redis) -> None:
    # The fires an ack call finishes are told by their own job and attempt, whichever fires
    # before them in the call were lost.
    for job in ("a", "b"):
        setup(s, job, dues=(1, 2))
    for c in s.claim(K, "w", batch=2, now_ms=T0 + MIN).claimed:
        fail(s, c)
    by_job = {c.job: c for c in s.claim(K, "w", batch=2, now_ms=T0 + 2 * MIN).claimed}
    lost, done = by_job["a"], by_job["b"]
    r.zrem(K.working, lost.fire_id)
    items = [(c.fire_id, c.token, c.job, {"fire": c.fire_id, "status": "ok"})
             for c in (lost, done)]
    assert s.ack_many(K, items) == [False, True]
    recovered = [e for e in outbox(r) if e["event"] == "recovered"]
    assert [(e["job"], e["fire"], e["attempt"]) for e in recovered] == [
        ("b", done.fire_id, done.token)]
    assert r.hget(K.failing, "a") == "1" and not r.hexists(K.failing, "b")


def test_missed_and_skipped_fires_are_told(s: Scripts, r: redis.Redis) -> None:
    setup(s, "late", deadline=1000)
    setup(s, "latest", catch_up="latest", dues=(1, 2))
    s.claim(K, "w", batch=10, now_ms=T0 + 5 * MIN)
    told = {(e["event"], e["job"], e.get("reason")) for e in outbox(r)}
    assert told == {("missed", "late", "missed"), ("skipped", "latest", "catch_up latest")}


def test_a_lost_lease_is_told_and_its_last_attempt_dies(s: Scripts, r: redis.Redis) -> None:
    setup(s)
    [c] = s.claim(K, "w1", lease_ms=1000, now_ms=T0 + MIN).claimed
    [again] = s.claim(K, "w2", lease_ms=1000, now_ms=T0 + MIN + 2000).claimed
    assert again.token == 2
    lost = outbox(r)[0]
    assert (lost["event"], lost["fire"], lost["attempt"]) == ("lease_lost", c.fire_id, 1)
    s.claim(K, "w3", lease_ms=1000, now_ms=T0 + MIN + 4000)  # token 3 = 1 + LOST_LEASE_EXTRA
    s.claim(K, "w4", lease_ms=1000, now_ms=T0 + MIN + 6000)
    assert [e["event"] for e in outbox(r)][-1] == "dead"
    assert r.hget(K.failing, "a") == "1"


def test_pause_after_failures_pauses_the_job_once_with_actor_auto(s: Scripts,
                                                                 r: redis.Redis) -> None:
    setup(s, dues=(1, 2, 3, 4), pause_after=2)
    for n in (1, 2):
        [c] = s.claim(K, "w", now_ms=T0 + n * MIN).claimed
        fail(s, c, pause_after=2, now=T0 + n * MIN)
    pause = json.loads(r.hget(K.paused, "a"))
    assert pause["actor"] == "auto" and pause["note"] == "auto: 2 fires failed in a row"
    assert [e["event"] for e in outbox(r)] == ["dead", "dead", "paused"]
    # Paused: the next fire is skipped, not run.
    result = s.claim(K, "w", now_ms=T0 + 3 * MIN)
    assert result.claimed == [] and result.dropped == [(fire_id("a", T0 + 3 * MIN), "paused")]
    # Resume starts the count again: one more failure does not pause it at once.
    assert s.resume(K, "a")[0] == 1
    assert r.hget(K.failing, "a") == "0"
    [c] = s.claim(K, "w", now_ms=T0 + 4 * MIN).claimed
    fail(s, c, pause_after=2, now=T0 + 4 * MIN)
    assert not r.hexists(K.paused, "a")


def test_a_fire_dead_of_a_lost_last_lease_triggers_its_failure_chain(s: Scripts,
                                                                       r: redis.Redis) -> None:
    chain_line = f"{D1}|all|0|allow|1|0|def|||||" + "|s=next;f=alert"
    s.publish(K, [("a", "-", chain_line, SPEC)], generation=1, now_ms=T0)
    s.plan(K, [("a", D1, T0 + 10 * MIN, [T0 + MIN])])
    [c] = s.claim(K, "w1", lease_ms=1000, now_ms=T0 + MIN).claimed
    r.hset(K.attempts, c.fire_id, 3)  # its last attempt: the lapse makes it dead
    s.claim(K, "w2", lease_ms=1000, now_ms=T0 + MIN + 2000)
    [chain] = [e for e in outbox(r) if e["event"] == "chain"]
    assert (chain["fire"], chain["status"], chain["next"]) == (c.fire_id, "dead", "alert")
