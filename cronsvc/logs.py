"""Logging set-up: readable lines by default, JSON lines for log shippers."""

from __future__ import annotations

import json
import logging
import sys
import time

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


def setup_logging(fmt: str = "human", name: str = "", level: int = logging.INFO) -> None:
    """Configure the root logger once for a cronsvc process named ``name``."""
    handler = logging.StreamHandler(sys.stderr)
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
