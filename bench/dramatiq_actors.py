"""The dramatiq actors `bench/dispatch.py` sends to, run by a real ``dramatiq`` worker on
the Redis broker ``DRAMATIQ_BROKER_URL``, with cronsvc's guard last among its middleware:
a message cronsvc sent runs once and reports back; one of dramatiq's own ``enqueue``
loop runs as it is. ``stamp`` notes when it started (:func:`bench.stamps.note`)."""

from __future__ import annotations

import os
import time
from typing import Any

import dramatiq
from dramatiq.brokers.redis import RedisBroker
from dramatiq.middleware import CurrentMessage

from bench.stamps import note
from cronsvc.contrib.dramatiq import GuardMiddleware

broker = RedisBroker(url=os.environ.get("DRAMATIQ_BROKER_URL", "redis://127.0.0.1:6379/0"))
broker.add_middleware(CurrentMessage())  # the id of a plain message, for its stamp
broker.add_middleware(GuardMiddleware())
dramatiq.set_broker(broker)


@dramatiq.actor(actor_name="noop", max_retries=0)
def noop(*args: Any, **kwargs: Any) -> None:
    """Nothing: what is measured is the path of the message."""


@dramatiq.actor(actor_name="stamp", max_retries=0)
def stamp(*args: Any, **kwargs: Any) -> None:
    started = time.time()
    message = CurrentMessage.get_current_message()
    note(started, message and message.message_id)
