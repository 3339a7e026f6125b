"""The guard runs a traced fire's task in the fire's trace: the delivery's trace context
is the task's current OpenTelemetry context, unless an instrumentation of the queue
already made the task a span of its own (from the same headers)."""

from __future__ import annotations

from dataclasses import replace

import redis
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider

from cronsvc.contrib.guard import Guard
from cronsvc.keys import Keys
from cronsvc.process.redis_server import RedisServer
from cronsvc.run.dispatch import KEEP_MS, Delivery
from cronsvc.store.scripts import Scripts
from tests.support.queues import traceparent_now

PARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


def sent(r: redis.Redis, due_ms: int) -> Delivery:
    """The first delivery of a fire, begun and sent as a traced cronsvc worker does."""
    fire = f"digest@{due_ms}"
    key = Keys().deliveries(fire)
    s = Scripts(r)
    s.dispatch(key, "begin", 1, KEEP_MS)
    s.dispatch(key, "sent", 1, KEEP_MS)
    return Delivery(fire, "digest", due_ms, 1, key, trace={"traceparent": PARENT})


def test_a_traced_delivery_s_task_runs_in_the_fire_s_trace(
        redis_server: RedisServer, r: redis.Redis) -> None:
    guard = Guard(redis_server.url)
    assert traceparent_now() is None
    assert guard.run(sent(r, 1700000000000), traceparent_now) == PARENT
    assert traceparent_now() is None  # the context before is back
    assert guard.run(replace(sent(r, 1700000060000), trace=None), traceparent_now) is None


def test_a_span_an_instrumentation_made_for_the_task_is_left_current(
        redis_server: RedisServer, r: redis.Redis) -> None:
    tracer = TracerProvider().get_tracer("a queue's instrumentation")
    with tracer.start_as_current_span("run digest") as span:
        ids = span.get_span_context()
        seen = Guard(redis_server.url).run(sent(r, 1700000000000), traceparent_now)
        assert str(seen).startswith(f"00-{ids.trace_id:032x}-{ids.span_id:016x}-")
    assert trace.get_current_span() is trace.INVALID_SPAN
