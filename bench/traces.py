"""Traces: the CPU a worker spends per fire on its trace (docs/tracing.md).

Each fire is what the worker does around a run of a no-op ``call`` job: its hooks told
of the start, :func:`cronsvc.kinds.execute`, its hooks told of the end and of the
recording. Untraced (the reference: no ``OTEL_*`` variables, so no tracing hook), then
traced, exporting over OTLP/HTTP to a local endpoint that takes each export and answers
200; the export of the last batch is counted (``force_flush``). CPU is this process's,
the SDK's export thread included.

Run: ``.venv/bin/python -m bench.traces [--fires 2000]``
"""

from __future__ import annotations

import argparse
import os
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from bench.common import Figure, Section
from cronsvc.config.models import parse_config
from cronsvc.kinds import execute
from cronsvc.metrics.traces import traces
from cronsvc.notify.pings import Pinger
from cronsvc.run.context import FireContext
from cronsvc.run.hooks import Hooks

JOB = parse_config("jobs:\n  noop: {call: 'builtins:len', args: [[]]}\n", "bench").jobs["noop"]
ROUNDS = 5


class Sink(BaseHTTPRequestHandler):
    """An OTLP/HTTP endpoint that takes every export (an empty ExportTraceServiceResponse
    is an empty body)."""

    def do_POST(self) -> None:  # noqa: N802 - the stdlib's name
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


def per_fire(hooks: Hooks, fires: int) -> float:
    """The best of ROUNDS rounds of ``fires`` fires: microseconds of CPU per fire."""
    best = float("inf")
    for r in range(ROUNDS + 1):  # the first round warms up
        t0 = time.process_time()
        for i in range(fires):
            ctx = hooks.started(JOB, FireContext("noop", f"noop@{r}{i}", i, 1, "bench"))
            outcome = execute(JOB, ctx)
            hooks.ended(JOB, ctx, outcome)
            hooks.recorded(ctx.fire_id, 1)
        hooks.close()  # a tracing hook exports what is queued
        if r:
            best = min(best, (time.process_time() - t0) / fires * 1e6)
    return best


def run(fires: int = 2000) -> Section:
    for name in [n for n in os.environ if n.startswith("OTEL_")]:
        del os.environ[name]
    untraced = per_fire(Hooks([Pinger()]), fires)
    server = ThreadingHTTPServer(("127.0.0.1", 0), Sink)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    os.environ["OTEL_EXPORTER_OTLP_ENDPOINT"] = f"http://127.0.0.1:{server.server_port}"
    os.environ["OTEL_BSP_MAX_QUEUE_SIZE"] = str(4 * fires)  # a round's spans: none dropped
    traced_hooks = traces("bench", lambda: int(time.time() * 1000))
    assert traced_hooks, "OTEL_EXPORTER_OTLP_ENDPOINT is set: the worker traces"
    traced = per_fire(Hooks([Pinger(), *traced_hooks]), fires)
    server.shutdown()
    return Section("Traces: CPU per fire", [
        Figure("traced fire, exported over OTLP/HTTP", f"{traced:.0f} us CPU",
               reference=f"{untraced:.1f} us CPU untraced"),
        Figure("what a trace adds to a fire", f"{traced - untraced:.0f} us CPU"),
    ], [f"best of {ROUNDS} rounds of {fires} fires of a no-op call, in one process"])


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fires", type=int, default=2000)
    run(ap.parse_args().fires).print()
