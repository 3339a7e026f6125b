"""Notice a changed job file within a second or two, and read it again, for planners and
workers alike.

A daemon thread looks at the file's modification time and size every
:data:`EVERY` seconds (a ``stat``: no inotify, so it works on every file
system, bind mounts and ConfigMap symlink swaps included) and calls back when
they change. The callback only asks for a reload; the reading, and keeping
the last good file when the new one is broken, are the caller's.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from pathlib import Path

from cronsvc.config.models import Config, load_config
from cronsvc.errors import ConfigError

EVERY = 1.0  # seconds between two looks at the file

Stat = tuple[int, int] | None


def file_stat(path: str | os.PathLike[str]) -> Stat:
    """``(mtime_ns, size)`` of the file, following links; None when it cannot be read."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_mtime_ns, st.st_size


class FileWatch:
    """Calls ``changed()`` from a thread of its own whenever the file at ``path`` changes."""

    def __init__(self, path: str | os.PathLike[str], changed: Callable[[], None],
                 every: float = EVERY) -> None:
        self.path = Path(path)
        self._changed = changed
        self._every = every
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._watch, name="cronsvc-filewatch",
                                            daemon=True)
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def _watch(self) -> None:
        last = file_stat(self.path)
        while not self._stop.wait(self._every):
            now = file_stat(self.path)
            if now != last:
                last = now
                self._changed()


def reread(path: str | Path, current: Config, log: logging.Logger) -> Config | None:
    """The job file at ``path`` read again: its Config if it differs from ``current``, else
    None. A broken file is logged, one located problem per line, and gives None: the
    caller keeps its last good config."""
    try:
        config = load_config(path)
    except ConfigError as exc:
        log.error("%s is invalid; keeping the last good config (%d jobs)", path,
                  len(current.jobs))
        for problem in exc.problems:
            log.error("%s", problem)
        return None
    return None if config == current else config
