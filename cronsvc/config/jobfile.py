"""The job file of a process, and its one owner: :class:`JobFile`.

Planners, workers, the notifier and the web server each hold one: the path, the last good
:class:`Config`, the watch that notices a change within a second or two, and whether the
file on disk is broken now (since when, with which problems). A broken file never
replaces the last good one: the process goes on with that, says so once in its log, and
once more when the file reads again; :meth:`JobFile.state` is what it tells the fleet, so
``cronsvc status``, the API and the pages show it until it clears.

A file that discovers jobs declared in Python (``discover:``) is those modules too: a change
of one of their files is a change of the job file, and reading it again collects their
declarations again (in a child process: see :mod:`cronsvc.config.discover`); a module that
no longer imports breaks the file like a YAML error does, located at its ``module:line``.

The watch is a daemon thread that looks at the files' modification time and size every
:data:`EVERY` seconds (a ``stat``: no inotify, so it works on every file system, bind
mounts and ConfigMap symlink swaps included). It only tells its owner; the owner reloads
when it suits it (the planner at its next tick, the worker between two claims).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from cronsvc.config.models import Config, load_config
from cronsvc.errors import ConfigError

EVERY = 1.0  # seconds between two looks at the file

log = logging.getLogger("cronsvc.config")
Stat = tuple[int, int] | None


def file_stat(path: str | os.PathLike[str]) -> Stat:
    """``(mtime_ns, size)`` of the file, following links; None when it cannot be read."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_mtime_ns, st.st_size


@dataclass(frozen=True)
class Broken:
    """The file on disk does not read: since when (ms since the epoch) and why."""

    since_ms: int
    problems: tuple[str, ...]

    def as_info(self) -> dict[str, object]:
        """As presence info carries it (``cronsvc status`` words it)."""
        return {"since": self.since_ms, "problem": self.problems[0] if self.problems else "",
                "problems": len(self.problems)}


class JobFile:
    """The job file at ``path``: read at once (ConfigError if it does not read), then read
    again by :meth:`reload` when it changed. :meth:`fixed` wraps a Config built in code,
    which never changes."""

    def __init__(self, path: str | os.PathLike[str], config: Config | None = None) -> None:
        self.path: Path | None = Path(path)
        stat = file_stat(self.path)
        self.config: Config = config if config is not None else load_config(self.path)
        self._stat = (stat, *map(file_stat, self.config.watched))
        self.broken: Broken | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @classmethod
    def fixed(cls, config: Config) -> JobFile:
        """A job file that is only ``config``: nothing to watch or read again."""
        self = cls.__new__(cls)
        self.path, self._stat, self.config, self.broken = None, (), config, None
        self._stop, self._thread = threading.Event(), None
        return self

    def __str__(self) -> str:
        return str(self.path) if self.path is not None else "the job file given in code"

    # -- reading again ---------------------------------------------------------------
    def reload(self, *, force: bool = False) -> Config | None:
        """Read the file again if it changed since the last read (or ``force``): the new
        Config if it reads and differs from the one in force, else None. A file that does
        not read is logged, one located problem per line, once per breakage; the last good
        Config stays in force."""
        if self.path is None:
            return None
        stat = self._stats()
        if stat == self._stat and not force:
            return None
        self._stat = stat
        try:
            config = load_config(self.path)
        except ConfigError as exc:
            self._broke(tuple(exc.problems))
            return None
        if config.watched != self.config.watched:
            self._stat = (stat[0], *map(file_stat, config.watched))
        if self.broken is not None:
            log.info("%s reads again: its last good config gives way to it", self.path)
            self.broken = None
        if config == self.config:
            return None
        self.config = config
        return config

    def reread(self) -> None:
        """:meth:`reload` for a watch of its own: a process that only shows the file."""
        self.reload(force=True)

    def _broke(self, problems: tuple[str, ...]) -> None:
        if self.broken is not None and self.broken.problems == problems:
            return  # said already
        log.error("%s is invalid; keeping the last good config (%d jobs)", self.path,
                  len(self.config.jobs))
        for problem in problems:
            log.error("%s", problem)
        since = self.broken.since_ms if self.broken else time.time_ns() // 1_000_000
        self.broken = Broken(since, problems)

    def state(self) -> dict[str, object]:
        """What a process tells the fleet of its file: its path, and if it is broken."""
        out: dict[str, object] = {"path": str(self)}
        if self.broken is not None:
            out["broken"] = self.broken.as_info()
        return out

    def _stats(self) -> tuple[Stat, ...]:
        """The stats of the file and of the modules its config was collected from."""
        return (file_stat(self.path) if self.path else None,
                *map(file_stat, self.config.watched))

    # -- watching --------------------------------------------------------------------
    def watch(self, changed: Callable[[], None], every: float = EVERY) -> None:
        """Call ``changed()`` from a thread of its own whenever the file, or a module it
        discovers jobs in, changes on disk (mtime or size), until :meth:`stop`. A fixed
        file has nothing to watch."""
        if self.path is None or self._thread is not None:
            return
        last = self._stats()  # now: a change from here on is told

        def look() -> None:
            nonlocal last
            while not self._stop.wait(every):
                now = self._stats()
                if now != last:
                    last = now
                    changed()

        self._thread = threading.Thread(target=look, name="cronsvc-filewatch", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop watching."""
        self._stop.set()
