"""The consumer's guard while cronsvc's Redis goes away: a start that Redis wrote but
whose reply was lost still runs the task, once; a restart of Redis delays the task and
loses nothing."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

import pytest
import redis

from cronsvc.contrib.guard import SKIPPED, Guard
from cronsvc.keys import Keys
from cronsvc.process.redis_server import RedisServer
from cronsvc.run.dispatch import KEEP_MS, Delivery
from cronsvc.store.scripts import Scripts
from tests.support.relay import relay
from tests.support.wait import wait_for

FIRE = "digest@1700000000000"


def sent(r: redis.Redis) -> Delivery:
    """The fire's first delivery, begun and sent as a cronsvc worker does."""
    key = Keys().deliveries(FIRE)
    s = Scripts(r)
    s.dispatch(key, "begin", 1, KEEP_MS)
    s.dispatch(key, "sent", 1, KEEP_MS)
    return Delivery(FIRE, "digest", 1700000000000, 1, key)


def states(r: redis.Redis, delivery: Delivery) -> list[str]:
    return [fields["state"] for _, fields in r.xrange(delivery.key)]


def test_a_start_whose_reply_was_lost_runs_the_task_once(
        redis_server: RedisServer, r: redis.Redis) -> None:
    delivery = sent(r)  # the script is in the server's cache: the guard's call runs at once
    runs: list[str] = []
    with relay(redis_server.port) as cut_once:
        guard = Guard(cut_once.url)
        cut_once.cut = b"\r\nstart\r\n"  # the start runs in Redis; its reply never comes
        assert guard.run(delivery, lambda: runs.append("first") or "done") == "done"
        assert cut_once.cuts == 1
    assert runs == ["first"]
    assert states(r, delivery) == ["sending", "sent", "started", "ok"]
    # Another copy of the same delivery is still a second one.
    assert Guard(redis_server.url).run(delivery, lambda: runs.append("second")) is SKIPPED
    assert runs == ["first"]


def test_the_guard_waits_out_a_restart_of_redis(
        fresh_server: Callable[..., RedisServer], caplog: pytest.LogCaptureFixture) -> None:
    server = fresh_server(appendfsync="always")
    r = redis.Redis.from_url(server.url, decode_responses=True)
    delivery = sent(r)
    guard = Guard(server.url)
    assert guard.scripts  # connected before the outage
    server.kill()
    done: dict[str, Any] = {}
    caplog.set_level(logging.WARNING, logger="cronsvc.contrib")
    worker = threading.Thread(target=lambda: done.update(v=guard.run(delivery, lambda: "ran")))
    worker.start()
    wait_for(lambda: "cannot reach cronsvc's Redis" in caplog.text, timeout=20,
             message="the guard to find Redis away")
    server.start()
    wait_for(lambda: not worker.is_alive(), timeout=30, message="the task to run")
    assert done == {"v": "ran"}
    assert states(r, delivery) == ["sending", "sent", "started", "ok"]
    r.close()


def test_a_task_begun_in_a_run_sees_its_fire_and_keeps_the_run_s_stop_and_output(
        redis_server: RedisServer, r: redis.Redis) -> None:
    from cronsvc import current, stopping
    from cronsvc.run.capture import install
    from cronsvc.run.context import FireContext
    from cronsvc.run.output import Kept
    from cronsvc.run.within import RUN, InRun

    delivery = sent(r)
    guard = Guard(redis_server.url)
    outer_fire = FireContext("outer", "outer@1", 1, 1)
    stop, out = threading.Event(), Kept()
    stop.set()
    token = RUN.set(InRun(outer_fire, stop, out))
    try:
        running = guard.begin(delivery)
        assert running is not None
        seen = current()
        assert seen is not None and (seen.fire_id, seen.job) == (FIRE, "digest")
        assert stopping()
        install()
        print("printed by the task")  # the run's output, as before the task began
        guard.finish(running, value="done")
        assert current() is outer_fire
    finally:
        RUN.reset(token)
    assert current() is None and not stopping()
    assert "printed by the task" in out.text()
