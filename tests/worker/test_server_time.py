"""The claim loop's wake time: the Redis server's clock on the monotonic one, from TIME
(µs) checked against each claim's reply (whole ms), on a real redis-server."""

from __future__ import annotations

import pytest
import redis

from cronsvc.clock import monotonic, redis_ms
from cronsvc.worker.server_time import ServerTime
from tests.support.wait import wait_for


def server_ms(r: redis.Redis) -> float:
    sec, usec = r.time()
    return int(sec) * 1000 + int(usec) / 1000


def test_a_wake_is_never_before_the_due_time_whatever_the_round_trip(r: redis.Redis) -> None:
    clock = ServerTime()
    clock.read(r)
    # A reply whose round trip began long before the server read its clock: taken from the
    # round trip's middle, the server's clock would seem 250 ms behind, the wake as early.
    sent = monotonic() - 0.5
    now_ms = redis_ms(r)
    received = monotonic()
    due = now_ms + 20
    at = clock.wake_at(due, now_ms, sent, received)
    wait_for(lambda: monotonic() >= at, timeout=5, interval=0.001, message="the wake")
    assert server_ms(r) >= due


def test_a_reply_the_last_time_read_disagrees_with_is_timed_alone(r: redis.Redis) -> None:
    clock = ServerTime()
    clock.read(r)
    # The server's clock stepped back 10 s since TIME was read: the reply alone says when.
    now_ms = redis_ms(r) - 10_000
    sent, received = monotonic(), monotonic() + 0.002
    at = clock.wake_at(now_ms + 300, now_ms, sent, received)
    assert at == (sent + received) / 2 + 0.3


def test_a_start_is_never_before_its_due_time_whatever_the_round_trip(r: redis.Redis) -> None:
    for read in (True, False):  # timed from TIME's read, and from the reply alone
        clock = ServerTime()
        if read:
            clock.read(r)
        sent = monotonic() - 0.5  # a round trip begun long before the server read its clock
        now_ms = redis_ms(r)
        received = monotonic()
        due = now_ms + 20
        at = clock.surely_at(due, now_ms, sent, received)
        wait_for(lambda: monotonic() >= at, timeout=5, interval=0.001,  # noqa: B023
                 message="the start")
        assert server_ms(r) >= due


def test_a_start_is_timed_from_the_higher_bound_of_the_time_read_and_the_reply(
    r: redis.Redis
) -> None:
    clock = ServerTime()
    clock.read(r)
    sent = monotonic()
    now_ms, received = redis_ms(r), monotonic() + 0.05  # a reply seen 50 ms late
    # TIME's read bounds the server's clock closer: the start is sooner than by the reply.
    assert clock.surely_at(now_ms + 300, now_ms, sent, received) < received + 0.3
    # The server's clock stepped back 10 s since TIME was read: the reply alone says when.
    back = now_ms - 10_000
    assert clock.surely_at(back + 300, back, sent, received) == pytest.approx(received + 0.3)
    # Or forward 10 s: the reply's bound is the higher.
    ahead = now_ms + 10_000
    assert clock.surely_at(ahead + 5, ahead, sent, received) == pytest.approx(received + 0.005)
