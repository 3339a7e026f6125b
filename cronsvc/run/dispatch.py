"""A fire handed to another system (a Celery task, an RQ job, a dramatiq or arq message):
what the message carries, and how every dispatching kind runs one fire.

The message's id is the fire id (:func:`message_id`), so a fire sent twice is the same
message twice. What a fire's run knows travels as :class:`Delivery`, in the message's
headers (:meth:`Delivery.headers`) or, where a library has none, in one keyword argument
or field (:meth:`Delivery.as_dict`); the consumer-side guard (:mod:`cronsvc.contrib`)
reads it back with :meth:`Delivery.read`. A traced fire's delivery carries its trace
context too: as ``traceparent`` and ``tracestate`` headers, or a ``trace`` field.

A delivery is numbered: ``attempt`` is the attempt of the fire that first sent it. A
dispatcher that dies between the send and the ack leaves its delivery "sending"; the
next holder of the fire sends the same delivery again (same id, same number) and the
guard runs it once. The states of a fire's deliveries, and their one writer, are in
``lua/dispatch-1.lua``; this layer knows them through :class:`Outcomes`, which the
worker lends a run.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from typing import Any, Protocol, TypeVar

from cronsvc.clock import iso_utc, monotonic, parse_iso_ms
from cronsvc.run.context import FireContext
from cronsvc.run.outcome import Result, Stop

T = TypeVar("T")

#: Every header a dispatched message carries, by field of :class:`Delivery`.
HEADERS = {
    "fire_id": "cronsvc-fire-id", "job": "cronsvc-job", "scheduled_ms": "cronsvc-scheduled-at",
    "attempt": "cronsvc-attempt", "schedule": "cronsvc-schedule",
    "payload": "cronsvc-payload", "key": "cronsvc-outcome-key",
}
#: The W3C trace context headers a traced fire's message carries beside them.
TRACE_HEADERS = ("traceparent", "tracestate", "baggage")
#: The keyword argument (arq) or option (dramatiq) that carries a delivery where the
#: library's message has no headers.
FIELD = "cronsvc"
#: How often a send to a broker that refused it is tried again, while the fire waits.
RESEND_EVERY = 0.5

_SAFE = re.compile(r"[A-Za-z0-9-]")


def message_id(fire_id: str) -> str:
    """The id a fire's message has: the fire id itself."""
    return fire_id


def safe_id(fire_id: str) -> str:
    """The fire id in letters, digits, ``-`` and ``_`` only (RQ refuses other job ids):
    every other character, ``_`` included, as ``_`` and two hex digits, so the mapping is
    one to one and :func:`unsafe_id` reverses it."""
    return "".join(c if _SAFE.fullmatch(c) else "".join(f"_{b:02x}" for b in c.encode())
                   for c in fire_id)


def unsafe_id(text: str) -> str:
    """The fire id :func:`safe_id` made ``text`` of."""
    return re.sub(r"(?:_[0-9a-f]{2})+",
                  lambda m: bytes.fromhex(m.group(0).replace("_", "")).decode(), text)


@dataclass(frozen=True)
class Delivery:
    """One message of a fire: who it is for, when it was due, and where its outcome goes
    (``key``, the Redis key of the fire's deliveries)."""

    fire_id: str
    job: str
    scheduled_ms: int
    attempt: int
    key: str
    schedule: str | None = None
    payload: Any = None
    #: The sending run's trace context (``traceparent``...), when the worker traces.
    trace: Mapping[str, str] | None = None

    @property
    def message_id(self) -> str:
        return message_id(self.fire_id)

    def headers(self) -> dict[str, str]:
        """The delivery as message headers: text only, the time as ISO 8601 UTC."""
        out = {HEADERS["fire_id"]: self.fire_id, HEADERS["job"]: self.job,
               HEADERS["scheduled_ms"]: iso_utc(self.scheduled_ms),
               HEADERS["attempt"]: str(self.attempt), HEADERS["key"]: self.key}
        if self.schedule is not None:
            out[HEADERS["schedule"]] = self.schedule
        if self.payload is not None:
            out[HEADERS["payload"]] = json.dumps(self.payload, separators=(",", ":"))
        if self.trace:  # under their own names, which a queue's instrumentation reads
            out.update(self.trace)
        return out

    def as_dict(self) -> dict[str, Any]:
        """The delivery as one JSON object, for a message with no headers."""
        return {k: v for k, v in asdict(self).items() if v is not None}

    @classmethod
    def read(cls, found: Mapping[str, Any] | None) -> Delivery | None:
        """The delivery in a message's headers or in its :data:`FIELD`, or None if the
        message was not sent by cronsvc (a task called by hand runs unguarded)."""
        if not found:
            return None
        if HEADERS["fire_id"] in found:
            text = {field: found.get(name) for field, name in HEADERS.items()}
            payload = text["payload"]
            trace = {name: str(found[name]) for name in TRACE_HEADERS if found.get(name)}
            return cls(str(text["fire_id"]), str(text["job"]),
                       parse_iso_ms(str(text["scheduled_ms"])), int(str(text["attempt"])),
                       str(text["key"]), text["schedule"] and str(text["schedule"]),
                       None if payload is None else json.loads(str(payload)), trace or None)
        if "fire_id" in found and "key" in found:
            return cls(str(found["fire_id"]), str(found["job"]), int(found["scheduled_ms"]),
                       int(found["attempt"]), str(found["key"]), found.get("schedule"),
                       found.get("payload"), found.get("trace"))
        return None

    def context(self, worker: str = "") -> FireContext:
        """What ``cronsvc.current()`` gives the task that runs this delivery."""
        return FireContext(job=self.job, fire_id=self.fire_id, scheduled_ms=self.scheduled_ms,
                           attempt=self.attempt, worker=worker, payload=self.payload,
                           schedule=self.schedule, trace=self.trace)


@dataclass(frozen=True)
class Begun:
    """Where a fire's deliveries stand as its holder begins: the delivery to send (a new
    one, or the one a holder before it may have sent), or the outcome one already had."""

    delivery: Delivery
    send: bool  # False: the delivery already started; wait for its outcome
    done: Result | None = None  # its outcome, if it came back before this holder began


class Outcomes(Protocol):
    """Where the outcome of a fire's delivery comes back (the worker's, over Redis)."""

    def begin(self, ctx: FireContext) -> Begun: ...

    def sent(self, delivery: Delivery) -> None: ...

    def wait(self, delivery: Delivery, stop: Stop) -> Result | None:
        """The delivery's outcome once it comes back; None if ``stop`` came first."""

    def lost(self, delivery: Delivery, why: str) -> None: ...

    def passing(self, exc: Exception) -> bool:
        """Whether ``exc``, raised by :meth:`begin` or :meth:`sent`, passes (the store
        away for a while): the call is tried again."""


def dispatch(ctx: FireContext, stop: Stop, send: Callable[[Delivery], str],
             wait: bool) -> Result:
    """Run one fire of a dispatching kind: send its delivery with ``send`` (which returns
    a line of output once the broker has accepted it, or raises), trying again while the
    broker refuses, then wait for the outcome the consumer reports, unless not ``wait``.

    The send is tried until it is accepted or the run is stopped (its timeout, a cancel,
    a lost lease): a broker down for a while delays the fire, and loses nothing.
    """
    outcomes = stop.outcomes
    if outcomes is None:
        return Result("failed", error="this worker has no outcome channel for dispatched jobs")
    begun = _noted(stop, outcomes, lambda: outcomes.begin(ctx))
    if isinstance(begun, Result):
        return begun
    if begun.done is not None:
        return begun.done
    delivery, said = begun.delivery, "resent" if begun.delivery.attempt != ctx.attempt else "sent"
    output = f"{said} {delivery.message_id} (delivery of attempt {delivery.attempt})"
    if begun.send:
        accepted = _send(delivery, stop, send)
        if isinstance(accepted, Result):
            return accepted
        output = f"{output}: {accepted}"
        noted = _noted(stop, outcomes, lambda: outcomes.sent(delivery))
        if isinstance(noted, Result):  # the next holder sends the same delivery again
            return noted._replace(output=output)
    else:
        output = f"{delivery.message_id} already started (delivery of attempt {delivery.attempt})"
    if not wait:
        return Result("ok", output=output)
    result = outcomes.wait(delivery, stop)
    if result is not None:
        return result._replace(output="\n".join(x for x in (output, result.output) if x))
    how = "timeout" if stop.deadline is not None and not stop.cancel.is_set() else "cancelled"
    if how == "timeout":
        why = f"sent; no outcome came back within {stop.timeout:g}s"
        outcomes.lost(delivery, why)
        return Result("timeout", output=output, error=why)
    return stop.stopped("cancelled")._replace(output=output)


def _noted(stop: Stop, outcomes: Outcomes, call: Callable[[], T]) -> T | Result:
    """``call()`` on the outcome channel, tried again while its store is away (a Redis
    restart), or the result of a run stopped first: a fire waits out the outage, as a
    broker's, rather than failing unsent or failing sent."""
    while True:
        try:
            return call()
        except Exception as exc:
            if not outcomes.passing(exc):
                raise
        how = stop.pause(RESEND_EVERY)
        if how != "done":
            return stop.stopped(how)


def _send(delivery: Delivery, stop: Stop, send: Callable[[Delivery], str]) -> str | Result:
    """The broker's word that it took ``delivery``, with how long that took when the
    broker kept it waiting (the fire's lag, in its record); or the result of a run
    stopped first. A library may itself retry inside one ``send``: the time tells."""
    last, refused, t0 = "", 0, monotonic()
    while True:
        try:
            accepted = send(delivery)
        except Exception as exc:  # the library's own errors: a broker down, refused
            last, refused = f"{type(exc).__name__}: {exc}".splitlines()[0], refused + 1
        else:
            took = monotonic() - t0
            if took < RESEND_EVERY:
                return accepted
            times = "once" if refused == 1 else f"{refused} times, the last"
            return f"{accepted} after {took:.1f}s" + (f"; refused {times}: {last}"
                                                       if refused else "")
        how = stop.pause(RESEND_EVERY)
        if how != "done":
            result = stop.stopped(how)
            return result._replace(error=f"{result.error}; not sent: {last}")


#: How long a fire's deliveries are kept after the last word of them: longer than any
#: broker's redelivery of a message (Celery's visibility timeout on Redis is an hour).
KEEP_MS = 24 * 3600 * 1000
#: What a delivery that ended may say.
ENDED = ("ok", "failed")


def entry_result(fields: Mapping[str, str], delivery: int) -> Result | None:
    """The outcome one entry of a fire's deliveries gives delivery number ``delivery``,
    or None if it is no outcome of it."""
    if fields.get("state") not in ENDED or fields.get("d") != str(delivery):
        return None
    took = fields.get("ms") or ""
    output = "\n".join(x for x in (f"ran in {took} ms" if took else "",
                                   fields.get("output") or "") if x)
    if fields["state"] == "ok":
        return Result("ok", output=output)
    return Result("failed", output=output, error=fields.get("error") or "failed")


def begun(reply: list[Any], ctx: FireContext, key: str) -> Begun:
    """The :class:`Begun` of the script's reply to ``begin`` for ``ctx``'s fire."""
    what, d = as_text(reply[0]), int(reply[1])
    delivery = Delivery(ctx.fire_id, ctx.job, ctx.scheduled_ms, d, key, ctx.schedule,
                        ctx.payload, ctx.trace)
    if what == "done":
        fields = {"d": str(d), "state": as_text(reply[2]), "ms": as_text(reply[3]),
                  "error": as_text(reply[4]), "output": as_text(reply[5])}
        return Begun(delivery, False, entry_result(fields, d))
    return Begun(delivery, what == "send")


def as_text(value: Any) -> str:
    """A reply's bytes or text as text."""
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)
