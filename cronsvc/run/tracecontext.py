"""A fire's trace context, carried into what the fire runs (docs/tracing.md).

When the worker traces (:mod:`cronsvc.metrics.traces`), a fire's context holds its run
span as a W3C trace context carrier (:attr:`cronsvc.run.context.FireContext.trace`:
``traceparent``, and ``tracestate`` or ``baggage`` when there are some). Each kind passes
it on in its own terms: a ``call`` runs with it as the current OpenTelemetry context
(:func:`attach`), a ``command`` gets it as ``TRACEPARENT`` and ``TRACESTATE``
(:func:`env`), a request and a dispatched message carry it as headers or fields of the
fire's delivery. A fire that is not traced has no carrier (None), and nothing here
imports OpenTelemetry for it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def env(carrier: Mapping[str, str]) -> dict[str, str]:
    """The carrier as environment variables: ``traceparent`` as ``TRACEPARENT`` (the
    names OpenTelemetry's environment-variable carriers use)."""
    return {name.upper().replace("-", "_"): value for name, value in carrier.items()}


def attach(carrier: Mapping[str, str] | None) -> Any:
    """Make the carrier's context this thread's (or task's) current OpenTelemetry context;
    what :func:`detach` takes to restore the one before. None, at no cost, for an
    untraced fire, or where OpenTelemetry is not installed (a queue's worker that runs
    a dispatched fire without it)."""
    if not carrier:
        return None
    try:
        from opentelemetry import context, propagate
    except ImportError:
        return None
    return context.attach(propagate.extract(carrier))


def adopt(carrier: Mapping[str, str] | None) -> Any:
    """:func:`attach`, unless a span is current already: a queue's own instrumentation
    (Celery's) made its span from the same headers, and the task's spans are its."""
    if not carrier:
        return None
    try:
        from opentelemetry import trace
    except ImportError:
        return None
    return None if trace.get_current_span().get_span_context().is_valid else attach(carrier)


def detach(token: Any) -> None:
    """Restore the context :func:`attach` replaced."""
    if token is not None:
        from opentelemetry import context

        context.detach(token)
