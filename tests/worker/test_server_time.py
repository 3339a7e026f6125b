"""The claim loop's wake time: the Redis server's clock on the monotonic one, from TIME
(µs) checked against each claim's reply (whole ms), on a real redis-server."""

from __future__ import annotations

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
