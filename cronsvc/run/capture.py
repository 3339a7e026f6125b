"""The output of a ``call`` job: what it prints and logs goes into its run's output.

A command's output is its own pipe; a call shares the worker's process, its
``sys.stdout``, ``sys.stderr`` and ``logging``. So each run of a call gets a
:class:`~cronsvc.run.output.Kept` found through a context variable (the ``output`` of
:data:`cronsvc.run.within.RUN`), set only around the user's function: a thread's runs and
the tasks on the worker's event loop each see their own, so concurrent calls do not mix.
:func:`install` puts, once, a proxy in place of ``sys.stdout`` and ``sys.stderr`` that
writes to the current run's output (to the real stream outside a run), and a handler on
the root logger that keeps a run's records in its output. The worker's own log handler
carries :class:`OutsideRuns`, so those records stay out of the worker's log; cronsvc's
lines about a run are written outside the user's function and are not captured.

What a run keeps is capped like a command's output (its head and tail,
:mod:`cronsvc.run.output`).
"""

from __future__ import annotations

import json
import logging
import sys
import threading
from typing import Any, TextIO

from cronsvc.run.output import Kept
from cronsvc.run.within import RUN


def kept(out: Kept, tail: str) -> str:
    """A call's output: what it printed and logged, then its return value or traceback,
    its head and tail kept (:class:`~cronsvc.run.output.Kept`)."""
    if tail:
        out.write(tail if out.ends_line else "\n" + tail)
    return out.text()


class _Stream:
    """Stands for ``sys.stdout`` or ``sys.stderr``: a run's writes go to its output, all
    others to the real stream, which answers everything else (fileno, encoding, ...)."""

    def __init__(self, real: TextIO) -> None:
        self.real = real

    def write(self, text: str) -> int:
        out = RUN.get().output
        if out is None:
            return self.real.write(text)
        out.write(text)
        return len(text)

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        if RUN.get().output is None:
            self.real.flush()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)


class _RunHandler(logging.Handler):
    """On the root logger: a record emitted inside a run goes to that run's output."""

    def __init__(self) -> None:
        super().__init__()
        self.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))

    def emit(self, record: logging.LogRecord) -> None:
        out = RUN.get().output
        if out is None:
            return
        try:
            out.write(self.format(record) + "\n")
        except Exception:
            self.handleError(record)


class OutsideRuns(logging.Filter):
    """For the worker's own handlers: a record emitted inside a call's run is that run's
    output, not a line of the worker's log."""

    def filter(self, record: logging.LogRecord) -> bool:
        return RUN.get().output is None


_HANDLER = _RunHandler()


def outside_runs_ignored(handler: logging.Handler) -> bool:
    """``handler`` is the one :func:`install` put on the root logger, as it was made: it
    does nothing with a record emitted outside a run."""
    return handler is _HANDLER and type(handler) is _RunHandler and not handler.filters
_install_lock = threading.Lock()


def install() -> None:
    """Route runs' prints and log records to their outputs. Cheap once done; done again
    if something replaced ``sys.stdout`` or ``sys.stderr`` since, or emptied the root
    logger's handlers."""
    root = logging.root  # what logging.getLogger() returns, without the call
    if (isinstance(sys.stdout, _Stream) and isinstance(sys.stderr, _Stream)
            and _HANDLER in root.handlers):
        return
    with _install_lock:
        if not isinstance(sys.stdout, _Stream):
            sys.stdout = _Stream(sys.stdout)  # type: ignore[assignment]
        if not isinstance(sys.stderr, _Stream):
            sys.stderr = _Stream(sys.stderr)  # type: ignore[assignment]
        if _HANDLER not in root.handlers:
            root.addHandler(_HANDLER)


def log_line(message: str, fields: dict[str, Any]) -> None:
    """``message k=v ...`` as one line of the current run's output (``ctx.log``); outside
    a run, an INFO line of the ``cronsvc.job`` logger."""
    words = [message, *(f"{key}={_value(value)}" for key, value in fields.items())]
    line = " ".join(words)
    out = RUN.get().output
    if out is None:
        logging.getLogger("cronsvc.job").info("%s", line)
    else:
        out.write(line + "\n")


def _value(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    if not text or any(c.isspace() or c in "\"=" for c in text):
        return json.dumps(text)
    return text
