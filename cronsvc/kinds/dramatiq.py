"""``dramatiq``: send a dramatiq message with dramatiq's own broker, its id the fire id.

```yaml
dramatiq: {actor: digest, queue: default, broker: "redis://host:6379/0",
           args: [1], kwargs: {a: 2}, options: {time_limit: 60000}}
```

The message is built by hand (:class:`dramatiq.Message`) and enqueued with the broker's
``enqueue``, so the user's actor need not be importable by cronsvc: dramatiq sends by
actor name, as ``actor.send`` would. ``broker`` is a Redis URL (``redis://``,
``rediss://``: dramatiq's RedisBroker) or an AMQP one (``amqp://``, ``amqps://``:
its RabbitmqBroker, with publisher confirms, so a message counts as sent once RabbitMQ
confirmed it); ``${VAR}`` in it is filled from the worker's environment when sending.

A dramatiq message has no headers: the fire's delivery travels in its options, under
``cronsvc`` (:meth:`cronsvc.run.dispatch.Delivery.as_dict`), which dramatiq keeps to the
consumer, where :class:`cronsvc.contrib.dramatiq.GuardMiddleware` reads it. The
message's ``max_retries`` is 0 unless ``options`` says otherwise: retrying a fire is the
job's ``retries``, each a new delivery the guard runs, while a retry of dramatiq's own
would be a second delivery the guard skips.
"""

from __future__ import annotations

import threading
from typing import Any

from pydantic import BaseModel, ConfigDict, field_validator

from cronsvc.clock import SYSTEM
from cronsvc.kinds.dispatching import Dispatching
from cronsvc.kinds.kind import Fields
from cronsvc.run.context import FireContext
from cronsvc.run.dispatch import FIELD, Delivery, dispatch
from cronsvc.run.outcome import Result, Stop
from cronsvc.secrets import expand

#: What `pip install` gives a worker that lacks the library.
EXTRA = "pip install 'cronsvc[dramatiq]'"
#: The broker a URL's scheme names.
SCHEMES = {"redis": "redis", "rediss": "redis", "amqp": "rabbitmq", "amqps": "rabbitmq"}


class DramatiqTarget(BaseModel):
    """The actor a fire sends a message to, and where."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    actor: str
    broker: str
    queue: str = "default"
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = {}
    options: dict[str, Any] = {}
    #: Wait for the outcome the guard reports (False: ok once the broker took it).
    wait: bool = True

    @field_validator("broker")
    @classmethod
    def _url(cls, value: str) -> str:
        if not value.startswith("${"):  # a whole URL from the environment: read when sending
            broker_of(value)
        return value

    @field_validator("options")
    @classmethod
    def _options(cls, value: dict[str, Any]) -> dict[str, Any]:
        if FIELD in value:
            raise ValueError(f"options may not set {FIELD}: it carries the fire's delivery")
        return value


class DramatiqFields(Fields):
    dramatiq: DramatiqTarget | None = None


class DramatiqKind(Dispatching):
    key = "dramatiq"
    hint = "dramatiq (a dramatiq actor to send a message to)"
    fields = DramatiqFields
    per_job = frozenset({"dramatiq"})
    url_fields = ("broker",)

    def run(self, job: Any, ctx: FireContext, stop: Stop) -> Result:
        target: DramatiqTarget = job.dramatiq
        broker = broker_for(target.broker)

        def send(delivery: Delivery) -> str:
            from dramatiq import Message

            options = {"max_retries": 0, **target.options, FIELD: delivery.as_dict()}
            broker.enqueue(Message(
                queue_name=target.queue, actor_name=target.actor, args=target.args,
                kwargs=dict(target.kwargs), options=options,
                message_id=delivery.message_id, message_timestamp=SYSTEM.now_ms()))
            return f"message to {target.actor} accepted by the broker"

        return dispatch(ctx, stop, send, target.wait)

    def prepare(self, job: Any) -> None:
        broker = broker_for(job.dramatiq.broker)
        # RedisBroker: one connection in its client's pool, which the first send takes.
        # (RabbitmqBroker keeps a connection per thread: the sending thread makes its own.)
        client = getattr(broker, "client", None)
        if client is not None:
            client.ping()


_BROKERS: dict[str, Any] = {}
_LOCK = threading.Lock()


def broker_for(url: str) -> Any:
    """The dramatiq broker on ``url`` (as written, ``${VAR}`` and all), made once per
    worker process; its ``${VAR}`` filled in now, never kept in the definition."""
    with _LOCK:
        broker = _BROKERS.get(url)
        if broker is None:
            broker = _BROKERS[url] = _make(expand(url, "dramatiq.broker"))
        return broker


def broker_of(url: str) -> str:
    """Which of dramatiq's brokers ``url`` is for; ValueError if none."""
    scheme, sep, _ = url.partition("://")
    if not sep or scheme.lower() not in SCHEMES:
        raise ValueError("expected a broker URL: redis://, rediss://, amqp:// or amqps://")
    return SCHEMES[scheme.lower()]


def _make(url: str) -> Any:
    """A sending broker: no middleware, since nothing runs here but ``enqueue``."""
    try:
        which = broker_of(url)
    except ValueError as exc:
        raise RuntimeError(f"dramatiq.broker: {exc}") from None
    try:
        if which == "redis":
            from dramatiq.brokers.redis import RedisBroker

            return RedisBroker(url=url, middleware=[])
        from dramatiq.brokers.rabbitmq import RabbitmqBroker
    except ImportError as exc:
        raise RuntimeError(f"dramatiq jobs need dramatiq on the worker: {EXTRA}") from exc
    # Publisher confirms: enqueue returns once RabbitMQ has taken the message.
    return RabbitmqBroker(url=url, confirm_delivery=True, middleware=[])


KIND = DramatiqKind()
