"""lua/dispatch-1.lua, the one writer of a dispatched fire's deliveries: a delivery sent
again after its sender died is the same delivery, and the guard runs it once."""

from __future__ import annotations

import redis

from cronsvc.keys import Keys
from cronsvc.run.dispatch import KEEP_MS
from cronsvc.store.scripts import Scripts

FIRE = "digest@1700000000000"


def step(s: Scripts, op: str, d: int, *rest: object) -> object:
    return s.dispatch(Keys().deliveries(FIRE), op, d, KEEP_MS, *rest)


def test_a_holder_after_a_dead_sender_sends_the_same_delivery_and_the_guard_runs_it_once(
        r: redis.Redis) -> None:
    s = Scripts(r)
    assert step(s, "begin", 1) == ["send", 1]
    assert step(s, "sent", 1) == 1
    # The sender died before its ack; the fire's next holder is attempt 2.
    assert step(s, "begin", 2) == ["send", 1]
    assert step(s, "start", 1, "w1") == 1
    assert step(s, "start", 1, "w2") == 0  # the second copy
    assert step(s, "begin", 3) == ["wait", 1]  # started: nothing is sent again
    assert step(s, "end", 1, "ok", 12, "", "'done'") == 1
    assert step(s, "begin", 4) == ["done", 1, "ok", "12", "", "'done'"]


def test_a_failed_delivery_is_followed_by_a_new_one_that_runs(r: redis.Redis) -> None:
    s = Scripts(r)
    step(s, "begin", 1)
    step(s, "start", 1, "w1")
    assert step(s, "end", 1, "failed", 3, "RuntimeError: no", "") == 1
    assert step(s, "begin", 2) == ["send", 2]
    assert step(s, "start", 1, "w1") == 0  # a late copy of the failed one
    assert step(s, "start", 2, "w1") == 1


def test_a_delivery_given_up_on_is_not_run_late_and_the_next_attempt_sends_anew(
        r: redis.Redis) -> None:
    s = Scripts(r)
    step(s, "begin", 1)
    step(s, "sent", 1)
    assert step(s, "lost", 1, "no outcome within 30s") == 1
    assert step(s, "start", 1, "w1") == 0
    assert step(s, "begin", 2) == ["send", 2]
    assert r.pttl(Keys().deliveries(FIRE)) > 0


def test_sent_after_the_task_started_keeps_it_started(r: redis.Redis) -> None:
    s = Scripts(r)
    step(s, "begin", 1)
    step(s, "start", 1, "w1")  # a fast consumer, before its sender wrote sent
    assert step(s, "sent", 1) == 0
    assert step(s, "start", 1, "w2") == 0
