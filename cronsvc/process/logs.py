"""Logging set-up: readable lines by default, JSON lines for log shippers."""

from __future__ import annotations

import json
import logging
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

from cronsvc.run.capture import OutsideRuns

# Fields a run line carries, so a shipper can index them.
RUN_FIELDS = ("job", "fire", "attempt", "worker")


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        out = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        for name in RUN_FIELDS:
            if hasattr(record, name):
                out[name] = getattr(record, name)
        if record.exc_info:
            out["exc"] = self.formatException(record.exc_info)
        return json.dumps(out, separators=(",", ":"))


_held = threading.local()  # this thread's lines held by batched_lines(), per handler


class LineHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """A stream handler that, inside :func:`batched_lines`, holds a thread's lines and
    writes them in one go: a write and a flush per line cost a worker more than the
    run of a short job. A warning writes the held lines first, so order is kept."""

    def emit(self, record: logging.LogRecord) -> None:
        held: dict[LineHandler, list[str]] | None = getattr(_held, "lines", None)
        if held is None:
            return super().emit(record)
        try:
            held.setdefault(self, []).append(self.format(record) + self.terminator)
        except Exception:
            self.handleError(record)
            return
        if record.levelno >= logging.WARNING:
            self.write_held(held.pop(self))

    def write_held(self, lines: list[str]) -> None:
        self.acquire()
        try:
            self.stream.write("".join(lines))
            self.flush()
        finally:
            self.release()


@contextmanager
def batched_lines() -> Iterator[None]:
    """Hold the log lines of this thread until the block ends, then write them."""
    _held.lines = {}
    try:
        yield
    finally:
        held, _held.lines = _held.lines, None
        for handler, lines in held.items():
            if lines:
                handler.write_held(lines)


def setup_logging(fmt: str = "human", name: str = "", level: int = logging.INFO) -> None:
    """Configure the root logger once for a cronsvc process named ``name``."""
    handler = LineHandler(sys.stderr)
    # What a call job logs is its run's output (cronsvc.run.capture), not the worker's.
    handler.addFilter(OutsideRuns())
    if fmt == "json":
        handler.setFormatter(JsonFormatter())
    else:
        prefix = f"{name} " if name else ""
        handler.setFormatter(
            logging.Formatter(f"%(asctime)s {prefix}%(levelname)s %(message)s", "%H:%M:%S")
        )
    # A worker logs a line per run: skip what no line shows (the logging HOWTO's
    # "Optimization" knobs: caller frame, thread, process and task names).
    logging._srcfile = None  # type: ignore[attr-defined]
    logging.logThreads = False
    logging.logProcesses = False
    logging.logMultiprocessing = False
    logging.logAsyncioTasks = False  # type: ignore[attr-defined]
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    # APScheduler logs every tick at INFO: keep the console for runs.
    logging.getLogger("apscheduler").setLevel(logging.WARNING)
    # httpx logs each request's URL at INFO with its ${VAR} filled in (a token in an http
    # job's path, a Slack webhook's URL): cronsvc's own lines name URLs as written.
    logging.getLogger("httpx").setLevel(logging.WARNING)
