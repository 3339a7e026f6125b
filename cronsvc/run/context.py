"""What a running job may know about its fire, and the two helpers a `call` job uses.

``cronsvc.current()`` is the :class:`FireContext` of the fire a call job is running;
``cronsvc.stopping()`` turns true once that run has timed out or was cancelled;
``ctx.log(...)`` writes a structured line into the run's output.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from cronsvc.clock import iso_utc
from cronsvc.run import tracecontext
from cronsvc.run.capture import log_line
from cronsvc.run.within import RUN


@dataclass(frozen=True)
class FireContext:
    """What a running job may know about its fire."""

    job: str
    fire_id: str
    scheduled_ms: int
    attempt: int
    worker: str = ""
    payload: Any = None
    schedule: str | None = None  # the runtime schedule the fire belongs to
    #: The fire's trace context (``traceparent``...) when the worker traces, else None
    #: (:mod:`cronsvc.run.tracecontext`).
    trace: Mapping[str, str] | None = None

    def log(self, message: str, **fields: Any) -> None:
        """One line, ``message key=value ...``, in the output of the run this is called
        in: ``ctx.log("rows", n=42)`` writes ``rows n=42`` (a value with a space or a
        quote is written as JSON). Outside a run, a line of the worker's log."""
        log_line(message, fields)

    def env(self) -> dict[str, str]:
        """The environment variables a command job receives: CRONSVC_*, and TRACEPARENT
        and TRACESTATE when the fire is traced."""
        env = {
            "CRONSVC_JOB": self.job,
            "CRONSVC_FIRE_ID": self.fire_id,
            "CRONSVC_SCHEDULED_AT": iso_utc(self.scheduled_ms),
            "CRONSVC_ATTEMPT": str(self.attempt),
            "CRONSVC_WORKER": self.worker,
        }
        if self.payload is not None:
            env["CRONSVC_PAYLOAD"] = json.dumps(self.payload)
        if self.schedule is not None:
            env["CRONSVC_SCHEDULE"] = self.schedule
        if self.trace:
            env.update(tracecontext.env(self.trace))
        return env


class Deferred(tuple):  # type: ignore[type-arg]
    """A fire's context not made yet, ``(make, of)``: made by ``make(of)`` when first asked
    (:func:`made`). Most calls never ask (nor take ``ctx``): their runs make a tuple, not a
    :class:`FireContext` (0.45 µs a fire). ``make`` gives the same context each time."""

    __slots__ = ()


def made(fire: FireContext | Deferred | None) -> FireContext | None:
    """The context ``fire`` stands for (made now, if it is :class:`Deferred`)."""
    if fire.__class__ is Deferred:
        make: Callable[[Any], FireContext] = fire[0]  # type: ignore[index]
        return make(fire[1])  # type: ignore[index]
    return fire  # type: ignore[return-value]


def current() -> FireContext | None:
    """The context of the fire being run by this call job, or None outside of one."""
    return made(RUN.get().fire)


def stopping() -> bool:
    """True once the running call job has timed out or was cancelled: it should return."""
    event = RUN.get().stop
    return event is not None and event.is_set()
