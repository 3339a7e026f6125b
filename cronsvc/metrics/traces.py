"""OpenTelemetry traces of a worker's fires: a :class:`cronsvc.run.hooks.RunHook`.

Each fire a worker runs is one trace (docs/tracing.md): the span ``cronsvc.fire <job>``
from the moment the worker takes the claimed fire up to the moment its result is
recorded in Redis, with two children, ``cronsvc.run`` (the run, whatever its kind) and
``cronsvc.ack`` (recording its result: an ack, a retry, a dead letter). The run's span
is the parent of what the fire runs: its context travels as W3C ``traceparent`` into a
call, a command's environment, a request's headers and a dispatched message
(:mod:`cronsvc.run.tracecontext`).

Configured by the standard ``OTEL_*`` variables, and off unless they ask for it
(:func:`wanted`): a worker that does not trace has no hook, imports no OpenTelemetry and
does nothing per fire. Spans are exported in batches from a thread of the SDK's, so a
run never waits on the collector.
"""

from __future__ import annotations

import functools
import logging
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from cronsvc.clock import iso_utc
from cronsvc.fires import kind_of
from cronsvc.run.context import FireContext
from cronsvc.run.outcome import Outcome

log = logging.getLogger("cronsvc.metrics")

#: Any of these set asks for traces (unless OTEL_SDK_DISABLED=true or the exporter is none).
ASKING = ("OTEL_TRACES_EXPORTER", "OTEL_EXPORTER_OTLP_ENDPOINT",
          "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
#: What `pip install` gives a worker that lacks OpenTelemetry.
EXTRA = "pip install 'cronsvc[otel]'"
#: The service a worker's spans name when OTEL_SERVICE_NAME (or the resource) names none.
SERVICE = "cronsvc"
#: How long a stopping worker waits for its last spans to be exported.
FLUSH_MS = 5000
#: The fires no timer made: run by hand (``cronsvc trigger``) or by a chain.
BY_HAND = ("trigger", "chain")
#: The kinds whose run hands the fire to another system, by that system.
MESSAGING = ("celery", "rq", "dramatiq", "arq")


def wanted(environ: Mapping[str, str] = os.environ) -> bool:
    """Whether the environment asks this process for traces."""
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    if environ.get("OTEL_TRACES_EXPORTER", "").strip().lower() == "none":
        return False
    return any(environ.get(name, "").strip() for name in ASKING)


def traces(worker_id: str, server_now: Callable[[], int]) -> list[Any]:
    """The tracing hook of a worker, in a list: empty when the environment does not ask
    for traces, or cannot have them (said once, in a warning)."""
    if not wanted():
        return []
    tracer = _tracer()
    return [] if tracer is None else [Traces(tracer, worker_id, server_now)]


@functools.cache
def _tracer() -> Any:
    """This process's tracer, on the global tracer provider: one the process set up
    already (``opentelemetry-instrument``), else one made here from the ``OTEL_*``
    variables and made global, so that a call job's own spans go out with the fire's.
    None, said once, when it cannot be had."""
    try:
        from opentelemetry import trace
    except ImportError:
        log.warning("OTEL_* variables ask for traces, but OpenTelemetry is not installed: "
                    "%s; tracing is off", EXTRA)
        return None
    if isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider):
        try:
            trace.set_tracer_provider(_provider())
        except ImportError as exc:
            log.warning("OTEL_* variables ask for traces, but %s is not installed: %s; "
                        "tracing is off", exc.name, EXTRA)
            return None
        except Exception as exc:  # a variable naming what cannot be had: the worker runs
            log.warning("traces: %s; tracing is off", exc)
            return None
    return trace.get_tracer("cronsvc")


def _provider() -> Any:
    """A tracer provider exporting as ``OTEL_TRACES_EXPORTER`` says (ValueError if it
    names what cannot be had)."""
    from opentelemetry.sdk.resources import SERVICE_NAME, Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    resource = Resource.create()  # OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES
    if str(resource.attributes.get(SERVICE_NAME, "")).startswith("unknown_service"):
        resource = resource.merge(Resource({SERVICE_NAME: SERVICE}))
    provider = TracerProvider(resource=resource)
    names = os.environ.get("OTEL_TRACES_EXPORTER", "") or "otlp"
    for name in (n.strip().lower() for n in names.split(",")):
        if name and name != "none":
            provider.add_span_processor(BatchSpanProcessor(_exporter(name)))
    return provider


def _exporter(name: str) -> Any:
    if name == "console":
        from opentelemetry.sdk.trace.export import ConsoleSpanExporter

        return ConsoleSpanExporter()
    if name != "otlp":
        from importlib.metadata import entry_points

        found = entry_points(group="opentelemetry_traces_exporter", name=name)
        if not found:
            raise ValueError(f"OTEL_TRACES_EXPORTER: no exporter named {name!r} is installed")
        return next(iter(found)).load()()
    protocol = (os.environ.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
                or os.environ.get("OTEL_EXPORTER_OTLP_PROTOCOL") or "http/protobuf")
    if protocol == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
    elif protocol == "http/protobuf":
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    else:
        raise ValueError(f"OTEL_EXPORTER_OTLP_PROTOCOL: {protocol!r} is not supported: "
                         "use http/protobuf or grpc")
    # The endpoint, headers, timeout, compression and certificates: OTEL_EXPORTER_OTLP_*.
    return OTLPSpanExporter()


@dataclass
class Spans:
    """The open spans of one fire."""

    fire: Any
    run: Any
    ack: Any = None


class Traces:
    """Spans of each fire a worker runs; a run's span context goes into its
    :class:`FireContext`'s ``trace``."""

    def __init__(self, tracer: Any, worker_id: str, server_now: Callable[[], int]) -> None:
        from opentelemetry import propagate, trace

        self._tracer, self._worker, self._server_now = tracer, worker_id, server_now
        self._trace, self._propagate = trace, propagate
        # By (fire id, attempt), from the run's start until its result is recorded: each
        # key is written by one thread at a time (the run's, then the results thread's).
        self._open: dict[tuple[str, int], Spans] = {}

    def started(self, job: Any, ctx: FireContext) -> FireContext:
        trace = self._trace
        now = time.time_ns()
        scheduled = iso_utc(ctx.scheduled_ms)
        placed = kind_of(ctx.fire_id)  # cron, schedule, trigger, at, chain, host
        attributes: dict[str, Any] = {
            "cronsvc.job": ctx.job, "cronsvc.job.kind": job.kind,
            "cronsvc.fire.id": ctx.fire_id, "cronsvc.fire.attempt": ctx.attempt,
            "cronsvc.fire.scheduled_at": scheduled,
            # Lag on the one clock, Redis's: when the run started, less when it was due.
            "cronsvc.fire.lag_ms": self._server_now() - ctx.scheduled_ms,
            "cronsvc.fire.kind": placed, "cronsvc.worker": self._worker,
            "cronsvc.pool": job.pool,
            # OpenTelemetry's conventions for a function run by a timer (or by hand).
            "faas.trigger": "other" if placed in BY_HAND else "timer", "faas.time": scheduled,
        }
        if job.cron is not None and placed in ("cron", "host"):
            attributes["faas.cron"] = job.cron
        if ctx.schedule is not None:
            attributes["cronsvc.fire.schedule"] = ctx.schedule
        fire = self._tracer.start_span(f"cronsvc.fire {ctx.job}", kind=trace.SpanKind.CONSUMER,
                                       attributes=attributes, start_time=now)
        run = self._tracer.start_span("cronsvc.run", trace.set_span_in_context(fire),
                                      kind=_run_kind(trace, job.kind),
                                      attributes=_run_attributes(job, ctx), start_time=now)
        carrier: dict[str, str] = {}
        self._propagate.inject(carrier, trace.set_span_in_context(run))
        self._open[(ctx.fire_id, ctx.attempt)] = Spans(fire, run)
        return replace(ctx, trace=carrier)

    def ended(self, job: Any, ctx: FireContext, outcome: Outcome) -> None:
        spans = self._open.get((ctx.fire_id, ctx.attempt))
        if spans is None:
            return
        said: dict[str, Any] = {"cronsvc.outcome": outcome.status}
        if outcome.exit_code is not None:
            said["process.exit.code"] = outcome.exit_code
        if outcome.status in ("failed", "timeout"):
            said["error.type"] = outcome.status
        for span in (spans.run, spans.fire):
            span.set_attributes(said)
            if outcome.status in ("failed", "timeout"):
                span.set_status(self._trace.StatusCode.ERROR, outcome.error or outcome.status)
        end = time.time_ns()
        spans.run.end(end)
        spans.ack = self._tracer.start_span("cronsvc.ack",
                                            self._trace.set_span_in_context(spans.fire),
                                            start_time=end)

    def recorded(self, fire_id: str, attempt: int) -> None:
        spans = self._open.pop((fire_id, attempt), None)
        if spans is None:
            return
        if spans.ack is None:  # the run never ended with an outcome (a crash)
            spans.run.set_status(self._trace.StatusCode.ERROR, "the run gave no outcome")
            spans.run.end()
        else:
            spans.ack.end()
        spans.fire.end()

    def close(self) -> None:
        flush = getattr(self._trace.get_tracer_provider(), "force_flush", None)
        if flush is not None:
            flush(FLUSH_MS)

    def wants(self, job: Any) -> bool:
        """Every fire is traced."""
        return True


def _run_kind(trace: Any, kind: str) -> Any:
    """The run span's kind: sending a message, making a request, or running here."""
    if kind in MESSAGING:
        return trace.SpanKind.PRODUCER
    return trace.SpanKind.CLIENT if kind == "http" else trace.SpanKind.INTERNAL


def _run_attributes(job: Any, ctx: FireContext) -> dict[str, Any]:
    if job.kind in MESSAGING:
        return {"messaging.system": job.kind, "messaging.operation.type": "send",
                "messaging.message.id": ctx.fire_id}
    return {}
