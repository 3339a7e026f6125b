"""``call`` targets for tests/features/test_traces.py: code instrumented as a user's would
be, each making a span of its own and writing the traceparent it ran under to ``path``."""

from __future__ import annotations

import asyncio
from pathlib import Path

from opentelemetry import propagate, trace

tracer = trace.get_tracer("tests.traced")


def _write_traceparent(path: str) -> None:
    carrier: dict[str, str] = {}
    propagate.inject(carrier)
    Path(path).write_text(carrier.get("traceparent", ""))


def work(path: str) -> str:
    """A sync call: one span of its own, under the fire's."""
    with tracer.start_as_current_span("user work"):
        _write_traceparent(path)
    return "done"


async def awaited_work(path: str) -> str:
    """An async call, run on the worker's loop: one span of its own, under the fire's."""
    with tracer.start_as_current_span("user awaited work"):
        await asyncio.sleep(0)
        _write_traceparent(path)
    return "done"
