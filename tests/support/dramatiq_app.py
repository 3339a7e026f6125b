"""dramatiq actors that a real ``dramatiq`` worker runs in the tests, on the Redis broker
``DRAMATIQ_BROKER_URL``: each run of an actor is a line in the ledger file it is given
(``CRONSVC_TEST_LEDGER``), and so is each message the worker receives and is done with,
run or skipped."""

from __future__ import annotations

import json
import os
from typing import Any

import dramatiq
from dramatiq.brokers.redis import RedisBroker
from dramatiq.middleware import Middleware

import cronsvc
from cronsvc.contrib.dramatiq import GuardMiddleware
from tests.support.queues import traceparent_now


def _write(line: dict[str, Any]) -> None:
    with open(os.environ["CRONSVC_TEST_LEDGER"], "a") as f:
        f.write(json.dumps(line) + "\n")


class Received(Middleware):
    """Notes each message as it arrives, before the guard judges it (its id and the
    delivery its options carry), and once it is done with, run or skipped."""

    def before_process_message(self, broker: Any, message: Any) -> None:
        _write({"received": message.message_id, "options": message.options.get("cronsvc")})

    def after_process_message(self, broker: Any, message: Any, *, result: Any = None,
                              exception: BaseException | None = None) -> None:
        _write({"done": message.message_id, "skipped": False})

    def after_skip_message(self, broker: Any, message: Any) -> None:
        _write({"done": message.message_id, "skipped": True})


broker = RedisBroker(url=os.environ.get("DRAMATIQ_BROKER_URL", "redis://127.0.0.1:6379/0"))
broker.add_middleware(Received())
broker.add_middleware(GuardMiddleware())
dramatiq.set_broker(broker)


def _note(**what: object) -> None:
    ctx = cronsvc.current()
    _write({"fire": ctx and ctx.fire_id, "attempt": ctx and ctx.attempt,
            "payload": ctx and ctx.payload, "pid": os.getpid(), **what})


@dramatiq.actor(actor_name="digest")
def digest(team: str, size: int = 0) -> str:
    _note(task="digest", team=team, size=size)
    return f"digest for {team}"


@dramatiq.actor(actor_name="broken")
def broken(team: str) -> None:
    _note(task="broken", team=team)
    raise RuntimeError(f"no digest for {team}")


@dramatiq.actor(actor_name="traced")
def traced() -> str:
    """Note the traceparent it runs under (the guard's, from the message's options)."""
    _note(task="traced", current=traceparent_now())
    return "traced"
