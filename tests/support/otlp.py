"""A real OTLP/HTTP trace receiver: an HTTP server on a loopback port that takes what an
OpenTelemetry exporter POSTs to ``/v1/traces`` (a protobuf ``ExportTraceServiceRequest``,
gzip or not), decodes it with opentelemetry-proto and keeps each span, flattened."""

from __future__ import annotations

import gzip
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any

from cronsvc.process.redis_server import free_port
from tests.support.receivers import serving
from tests.support.wait import wait_for


@dataclass
class Span:
    """One received span: ids as hex, attributes as Python values."""

    name: str
    trace_id: str
    span_id: str
    parent_id: str  # "" for a root span
    kind: str  # SPAN_KIND_CONSUMER...
    status: str  # STATUS_CODE_UNSET, STATUS_CODE_OK, STATUS_CODE_ERROR
    message: str  # the status's description
    attributes: dict[str, Any]
    resource: dict[str, Any]
    start_ns: int
    end_ns: int

    def parent_of(self, traceparent: str) -> bool:
        """Whether a W3C ``traceparent`` names this span, sampled."""
        version, trace_id, span_id, flags = traceparent.split("-")
        return (version, trace_id, span_id) == ("00", self.trace_id, self.span_id) and \
            bool(int(flags, 16) & 1)


@dataclass
class Receiver:
    endpoint: str  # what OTEL_EXPORTER_OTLP_ENDPOINT is set to
    spans: list[Span] = field(default_factory=list)
    requests: int = 0

    def named(self, prefix: str) -> list[Span]:
        return [span for span in list(self.spans) if span.name.startswith(prefix)]

    def env(self) -> dict[str, str]:
        """The OTEL_* variables of a worker that exports here."""
        return {"OTEL_EXPORTER_OTLP_ENDPOINT": self.endpoint,
                "OTEL_SERVICE_NAME": "cronsvc-test",
                "OTEL_RESOURCE_ATTRIBUTES": "deployment.environment.name=test",
                "OTEL_BSP_SCHEDULE_DELAY": "50"}  # ms: export soon, not after 5 s

    def fire(self, fire_id: str) -> Span:
        """The span of fire ``fire_id``, once it is received."""
        return wait_for(lambda: next((s for s in self.named("cronsvc.fire ")
                                      if s.attributes["cronsvc.fire.id"] == fire_id), None),
                        timeout=30, message=f"the span of {fire_id}")

    def children(self, parent: Span) -> dict[str, Span]:
        """The spans received whose parent is ``parent``, by name."""
        return {s.name: s for s in list(self.spans) if s.parent_id == parent.span_id}


def _value(value: Any) -> Any:
    which = value.WhichOneof("value")
    if which == "array_value":
        return [_value(v) for v in value.array_value.values]
    return getattr(value, which) if which else None


def _attributes(pairs: Any) -> dict[str, Any]:
    return {pair.key: _value(pair.value) for pair in pairs}


def decode(body: bytes) -> list[Span]:
    """The spans of one ExportTraceServiceRequest."""
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )
    from opentelemetry.proto.trace.v1.trace_pb2 import Span as ProtoSpan
    from opentelemetry.proto.trace.v1.trace_pb2 import Status

    request = ExportTraceServiceRequest()
    request.ParseFromString(body)
    out = []
    for resource_spans in request.resource_spans:
        resource = _attributes(resource_spans.resource.attributes)
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                out.append(Span(
                    span.name, span.trace_id.hex(), span.span_id.hex(),
                    span.parent_span_id.hex(), ProtoSpan.SpanKind.Name(span.kind),
                    Status.StatusCode.Name(span.status.code), span.status.message,
                    _attributes(span.attributes), resource, span.start_time_unix_nano,
                    span.end_time_unix_nano))
    return out


@contextmanager
def otlp_receiver() -> Iterator[Receiver]:
    """An OTLP/HTTP receiver on a free loopback port, answering each export with 200."""
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceResponse,
    )

    port = free_port()
    box = Receiver(f"http://127.0.0.1:{port}")
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - the stdlib's name
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            if self.headers.get("Content-Encoding") == "gzip":
                body = gzip.decompress(body)
            if self.path != "/v1/traces":
                self.send_response(404)
                self.end_headers()
                return
            spans = decode(body)
            with lock:
                box.spans.extend(spans)
                box.requests += 1
            answer = ExportTraceServiceResponse().SerializeToString()
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        def log_message(self, *args: Any) -> None:
            pass

    with serving(port, Handler):
        yield box
