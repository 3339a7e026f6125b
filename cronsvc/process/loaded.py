"""What a worker run by ``--reload`` tells its supervisor: the files of the code it loaded.

The supervisor (:mod:`cronsvc.process.reload`) never imports the jobs' code: it outlives
every swap, and old code held there would be the code it is meant to replace. So each
worker child imports its jobs' targets (what each kind's ``imports()`` names: a
``call``'s function, ``celery.app``) before it claims anything, and writes to a report
file the files of every module it holds that is the user's (neither the standard
library, site-packages nor cronsvc), again whenever it has imported more or its number
of running fires changed. A target that does not import ends the child before it
claims: the report then says why, and the supervisor keeps the worker it has.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import sysconfig
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from cronsvc.kinds import KINDS
from cronsvc.run.calls import ImportProblem, locate

#: Where the supervisor wants the report; a worker without it is not run by --reload.
REPORT_ENV = "CRONSVC_RELOAD_REPORT"
#: The exit code of a child whose jobs' code does not import.
LOAD_FAILED = 3
#: How often a running child looks for new modules and a new count of running fires.
REPORT_EVERY = 0.5

_PACKAGE = Path(__file__).resolve().parent.parent  # cronsvc itself: not the user's code


def _not_users() -> tuple[Path, ...]:
    """Where the interpreter's own modules and installed packages live."""
    roots = {sys.prefix, sys.base_prefix, sys.exec_prefix,
             *(sysconfig.get_paths().get(k, "") for k in ("stdlib", "platstdlib",
                                                         "purelib", "platlib"))}
    return (*(Path(r).resolve() for r in roots if r), _PACKAGE)


def _stamp(path: str) -> list[int] | None:
    """(mtime in ns, size) of a file, as JSON keeps it; None if it is gone."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return [st.st_mtime_ns, st.st_size]


class UserFiles:
    """The source files of the user's modules this process imported, each with its
    (mtime, size) when first seen, just after its import: the supervisor's baseline, so
    an edit made before it reads the report still counts. Each module file is looked at
    once: a worker holds hundreds of modules, and this runs every half second."""

    def __init__(self, extra: tuple[str, ...] = ()) -> None:
        self.stamps: dict[str, list[int] | None] = {}
        self._skip = _not_users()
        self._looked: set[str] = set()
        self._modules = -1  # len(sys.modules) when last looked: unchanged, nothing new
        self._take(extra)

    def update(self) -> dict[str, list[int] | None]:
        if len(sys.modules) != self._modules:
            self._modules = len(sys.modules)
            self._take(getattr(m, "__file__", None) for m in list(sys.modules.values()))
        return self.stamps

    def _take(self, names: Iterable[object]) -> None:
        for name in names:
            if not isinstance(name, str) or name in self._looked:
                continue
            self._looked.add(name)
            path = Path(name).resolve()
            if name.endswith(".py") and not any(path.is_relative_to(r) for r in self._skip):
                self.stamps.setdefault(str(path), _stamp(str(path)))


def target_paths(config: Any) -> list[str]:
    """``module:attribute`` of every target the jobs of ``config`` name, once each."""
    return list(dict.fromkeys(
        target.path for job in config.jobs.values()
        for target in KINDS[job.kind].imports(job).values()))


def _module_file(path: str) -> str | None:
    """The file a target's module would be imported from, without running it."""
    try:
        spec = importlib.util.find_spec(path.partition(":")[0])
    except Exception:  # its package does not import either: the error says which
        return None
    return spec.origin if spec is not None and spec.origin else None


def preload(paths: list[str]) -> tuple[str | None, tuple[str, ...]]:
    """Import each target; the first problem (or None) and the files of the targets'
    modules, so a module that does not import is watched too."""
    files = tuple(f for f in map(_module_file, paths) if f)
    for path in paths:
        try:
            locate(path)
        except ImportProblem as exc:
            cause = exc.__cause__
            where = getattr(cause, "filename", None) if isinstance(cause, SyntaxError) else None
            return str(exc), (*files, *([where] if where else []))
    return None, files


class Reporter:
    """Writes this worker's report (its id, pid, running fires, user files) whenever it
    changes, from a thread of its own until the process ends."""

    def __init__(self, report: str, worker_id: str, files: tuple[str, ...] = ()) -> None:
        self.report = report
        self.worker_id = worker_id
        self.files = UserFiles(files)
        self.running: Callable[[], int] = lambda: 0
        self._last: dict[str, Any] = {}

    def write(self, error: str | None = None) -> None:
        state = {"worker": self.worker_id, "pid": os.getpid(), "running": self.running(),
                 "files": dict(self.files.update()), "error": error}
        if state == self._last:
            return
        tmp = f"{self.report}.tmp"
        with open(tmp, "w") as out:
            json.dump(state, out)
        os.replace(tmp, self.report)  # the supervisor never reads half a report
        self._last = state

    def start(self, running: Callable[[], int]) -> None:
        """Report now, then every :data:`REPORT_EVERY` what changed."""
        self.running = running
        self.write()

        def loop() -> None:
            while True:
                time.sleep(REPORT_EVERY)
                try:
                    self.write()
                except OSError:  # the supervisor is gone with its folder: nothing to tell
                    return

        threading.Thread(target=loop, name="cronsvc-reload-report", daemon=True).start()


def loaded_code(config: Any, worker_id: str) -> Reporter | None:
    """In a worker run by --reload: import its jobs' code and return the reporter to
    start; if that code does not import, report why and end this process
    (:data:`LOAD_FAILED`) before it claims anything. None when not run by --reload."""
    report = os.environ.pop(REPORT_ENV, None)  # not for the commands its jobs start
    if not report:
        return None
    error, files = preload(target_paths(config))
    reporter = Reporter(report, worker_id, files)
    if error is not None:
        reporter.write(error)
        sys.exit(LOAD_FAILED)  # the supervisor logs the error: once, and plainly
    return reporter
