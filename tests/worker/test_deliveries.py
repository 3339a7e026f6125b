"""A dispatched fire while cronsvc's Redis restarts: noting its delivery (begun before the
send, sent after it) waits for Redis to come back, so the fire is neither failed unsent
nor failed after its message went out."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

import pytest
import redis

from cronsvc.clock import monotonic
from cronsvc.keys import Keys
from cronsvc.process.redis_server import RedisServer
from cronsvc.run.context import FireContext
from cronsvc.run.dispatch import Delivery, dispatch
from cronsvc.run.outcome import Stop
from cronsvc.store.scripts import Scripts
from cronsvc.worker.deliveries import Deliveries
from tests.support.wait import wait_for

FIRE = "digest@1700000000000"


@pytest.mark.parametrize("down", ["before the begin", "after the send"])
def test_a_redis_restart_delays_the_fire_and_loses_nothing(
        down: str, fresh_server: Callable[..., RedisServer],
        caplog: pytest.LogCaptureFixture) -> None:
    server = fresh_server(appendfsync="always")
    client = redis.Redis.from_url(server.url, decode_responses=True)
    Scripts(client).dispatch(Keys().deliveries("warm@1"), "begin", 1, 1000)  # scripts loaded
    sent: list[Delivery] = []

    def send(delivery: Delivery) -> str:
        sent.append(delivery)
        if down == "after the send":
            server.kill()
        return "taken"

    stop = Stop(threading.Event(), 60, monotonic() + 60,
                outcomes=Deliveries(client, Scripts(client), Keys()))
    ctx = FireContext("digest", FIRE, 1700000000000, 1, "w1")
    if down == "before the begin":
        server.kill()
    caplog.set_level(logging.WARNING, logger="cronsvc")
    done: dict[str, Any] = {}
    run = threading.Thread(target=lambda: done.update(result=dispatch(ctx, stop, send, False)))
    run.start()
    wait_for(lambda: "cannot note a dispatched fire's delivery" in caplog.text, timeout=20,
             message="the run to find Redis away")
    server.start()
    wait_for(lambda: not run.is_alive(), timeout=30, message="the fire to be sent")
    assert done["result"].status == "ok", done
    assert [d.attempt for d in sent] == [1]
    states = [fields["state"] for _, fields in client.xrange(Keys().deliveries(FIRE))]
    assert states == ["sending", "sent"]
    client.close()
