"""Logging set-up: readable lines by default, JSON lines for log shippers."""

from __future__ import annotations

import json
import logging
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from json.encoder import encode_basestring_ascii
from typing import Any, cast

from cronsvc.run.capture import OutsideRuns, outside_runs_ignored
from cronsvc.run.within import RUN

# Fields a run line carries, so a shipper can index them.
RUN_FIELDS = ("job", "fire", "attempt", "worker")


# Made once: json.dumps with separators makes an encoder per call (a line per run).
_COMPACT = json.JSONEncoder(separators=(",", ":")).encode
_str = encode_basestring_ascii


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
        return _COMPACT(out)

    def line(self, created: float, level: str, logger: str, msg: str,
             fields: dict[str, Any]) -> str:
        """What :meth:`format` makes of a record made at ``created`` (time.time()) with
        these fields, made without one."""
        second = int(created)
        if second != self._second[0]:
            self._second = (second, time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(created)))
        out = [f'{{"ts":"{self._second[1]}.{int((created - second) * 1000):03d}Z","level":',
               _str(level.lower()), ',"logger":', _str(logger), ',"msg":', _str(msg)]
        for name in RUN_FIELDS:
            if name in fields:
                v = fields[name]
                if v.__class__ is str:
                    out += (',"', name, '":', _str(v))
                elif v.__class__ is int:
                    out += (',"', name, '":', int.__repr__(v))
                else:  # another type: as json writes it
                    out += (',"', name, '":', _COMPACT(v))
        out.append("}")
        return "".join(out)

    _second: tuple[int, str] = (-1, "")  # the last second's time


class LineFormatter(logging.Formatter):
    """The readable line: ``TIME [NAME ]LEVEL MESSAGE``."""

    DATEFMT = "%H:%M:%S"

    def __init__(self, prefix: str = "") -> None:
        self.made = f"%(asctime)s {prefix}%(levelname)s %(message)s"
        super().__init__(self.made, self.DATEFMT)
        self.prefix = prefix
        self._second: tuple[int, Any, str] = (-1, None, "")  # the last second's time

    def intact(self) -> bool:
        """Still formatting as made (nobody changed its format or time format)."""
        return (self._fmt == self.made and self.datefmt == self.DATEFMT
                and type(self._style) is logging.PercentStyle and self._style._fmt == self.made)

    def line(self, created: float, level: str, logger: str, msg: str,
             fields: dict[str, Any]) -> str:
        """What :meth:`format` makes of a record made at ``created`` with this message."""
        second, converter, asctime = self._second
        if second != int(created) or converter is not self.converter:
            converter = self.converter
            asctime = time.strftime(self.DATEFMT, converter(created))
            self._second = (int(created), converter, asctime)
        return f"{asctime} {self.prefix}{level} {msg}"


Formatters = JsonFormatter | LineFormatter


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


class LineWriter:
    """Writes lines of one logger at one level as logging would, held as
    :class:`LineHandler` holds them (see :func:`line_writer`)."""

    __slots__ = ("_clock", "_end", "_handler", "_held", "_level", "_line", "_name", "plain")

    def __init__(self, held: dict[LineHandler, list[str]], handler: LineHandler,
                 fmt: Formatters, name: str, level: str) -> None:
        self._held, self._handler, self._line = held, handler, fmt.line
        self._name, self._level, self._end = name, level, handler.terminator
        self._clock = time.time
        #: The format shows no fields of a line: :meth:`lines` needs none.
        self.plain = type(fmt) is LineFormatter

    def __call__(self, msg: str, fields: dict[str, Any]) -> None:
        """One line: ``msg``, with its fields."""
        # Looked up per line: a warning in between writes the handler's list and drops it.
        self._held.setdefault(self._handler, []).append(
            self._line(self._clock(), self._level, self._name, msg, fields) + self._end)

    def lines(self, msgs: list[str], fields: list[dict[str, Any]] | None = None) -> None:
        """A line per message, made at once (the time read once for them all), the fields
        of each in ``fields`` (None: a :attr:`plain` format's lines, which show none)."""
        if not msgs:
            return
        held = self._held.setdefault(self._handler, [])
        now, line, level, name, end = self._clock(), self._line, self._level, self._name, self._end
        if fields is None:
            if not self.plain:
                raise ValueError("these lines show their fields: give them")
            head = line(now, level, name, "", {})  # the line of an empty message
            held.append(head + (end + head).join(msgs) + end)
            return
        held.extend([line(now, level, name, msg, f) + end
                     for msg, f in zip(msgs, fields, strict=True)])


def line_writer(logger: logging.Logger, level: int) -> LineWriter | None:
    """A writer of ``logger``'s lines at ``level`` that makes each line as logging would
    and holds it as :class:`LineHandler` does, without logging's LogRecord, formatter and
    handler calls (most of what a worker spends on its line per run); None unless that is
    all logging would do with them right now: inside :func:`batched_lines`, the level
    enabled, no filter on the way but :class:`OutsideRuns` (outside any run), and the
    only handler to see them one LineHandler set up by :func:`setup_logging` (and the one
    that takes the records of runs, which ignores these). A user's own
    handler, filter, logger class or record factory gets the lines through logging.
    Asked once per batch of lines: what logging is set to do may change meanwhile."""
    held: dict[LineHandler, list[str]] | None = getattr(_held, "lines", None)
    if (held is None or type(logger) is not logging.Logger
            or logging.getLogRecordFactory() is not logging.LogRecord
            or not logger.isEnabledFor(level)):
        return None
    handler: LineHandler | None = None
    node: logging.Logger | None = logger
    while node is not None:
        if node.disabled or node.filters:
            return None
        for h in node.handlers:
            if level >= h.level and not outside_runs_ignored(h):
                if handler is not None or type(h) is not LineHandler:  # not a subclass
                    return None
                handler = cast(LineHandler, h)
        node = node.parent if node.propagate else None
    if handler is None or not all(type(f) is OutsideRuns for f in handler.filters):
        return None
    if RUN.get().output is not None:  # OutsideRuns would drop them
        return None
    fmt = handler.formatter
    if not (type(fmt) is JsonFormatter or (type(fmt) is LineFormatter and fmt.intact())):
        return None
    return LineWriter(held, handler, fmt, logger.name, logging.getLevelName(level))


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
        handler.setFormatter(LineFormatter(prefix))
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
