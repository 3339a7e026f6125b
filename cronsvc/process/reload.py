"""``cronsvc worker --reload``: a fresh worker process for new code, and no fire lost.

A small supervisor owns the worker processes. It polls the files of the user's code that
its worker imported (the worker reports them, :mod:`cronsvc.process.loaded`) every half
second. On a change it starts a fresh worker, waits until that one is up (registered in
Redis, so it claims from then on), and only then sends the old one SIGTERM: the old
worker stops claiming, finishes and records its running fires, and exits. For a moment
both claim; the claim script gives each fire to one of them, and a fire's lease stays
with the worker that runs it, so no fire is lost or run twice across a swap. New code
that does not import leaves the old worker running, and says why in one line.

The supervisor never imports the jobs' code (it outlives every swap). Its workers run in
sessions of their own, so a Ctrl-C reaches only it; it passes SIGTERM and SIGINT on to
every worker it runs (a second signal too: they give their running fires back).
"""

from __future__ import annotations

import importlib.util
import json
import logging
import os
import shutil
import signal
import subprocess
import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cronsvc.clock import monotonic
from cronsvc.process.loaded import LOAD_FAILED, REPORT_ENV
from cronsvc.process.up import RESTART_LIMIT, RESTART_WINDOW, wait_or_kill

log = logging.getLogger("cronsvc.reload")

#: How often the watched files' modification times are read (seconds).
POLL = 0.5
#: How long a new worker may take to register before the swap is given up (seconds).
UP_TIMEOUT = 60.0

Stamp = tuple[int, int] | None  # (mtime in ns, size); None: the file is gone


def stamp(path: str) -> Stamp:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_mtime_ns, st.st_size


def reported(state: dict[str, Any]) -> dict[str, Stamp]:
    """The files a worker's report names, each with its stamp as the worker saw it."""
    files = state.get("files")
    if not isinstance(files, dict):
        return {}
    return {str(path): (int(s[0]), int(s[1])) if isinstance(s, list) and len(s) == 2
            else None for path, s in files.items()}


def shown(path: str) -> str:
    """A file as the log names it: relative to the working directory when inside it."""
    rel = os.path.relpath(path)
    return path if rel.startswith("..") else rel


@dataclass
class Generation:
    """One worker process, started for one version of the code."""

    number: int
    proc: subprocess.Popen[bytes]
    report: Path
    up: bool = False

    @property
    def pid(self) -> int:
        return self.proc.pid

    def state(self) -> dict[str, Any]:
        """Its last report (:class:`cronsvc.process.loaded.Reporter`), or {}."""
        try:
            return dict(json.loads(self.report.read_text()))
        except (OSError, ValueError):
            return {}

    def alive(self) -> bool:
        return self.proc.poll() is None

    def signal(self, sig: int) -> None:
        if self.alive():
            self.proc.send_signal(sig)


@dataclass
class Files:
    """The watched files, each with its stamp when it was last taken in."""

    stamps: dict[str, Stamp] = field(default_factory=dict)

    def track(self, stamps: dict[str, Stamp]) -> None:
        """Watch these files too, from the stamps a worker saw as it imported them."""
        for path, seen in stamps.items():
            self.stamps.setdefault(path, seen)

    def changed(self) -> dict[str, Stamp]:
        """The files whose stamp changed, with their new one."""
        now = {path: stamp(path) for path in self.stamps}
        return {path: s for path, s in now.items() if s != self.stamps[path]}

    def accept(self, stamps: dict[str, Stamp]) -> None:
        self.stamps.update(stamps)


class Reloader:
    """Runs ``argv`` (a ``cronsvc worker`` without --reload) and runs it afresh when the
    code it imported changes. ``registered(worker_id, pid)`` says whether that worker
    process is up in Redis."""

    def __init__(self, argv: list[str], name: str | None,
                 registered: Callable[[str, int], bool], *, stop_timeout: float = 60.0,
                 poll: float = POLL, up_timeout: float = UP_TIMEOUT) -> None:
        self.argv = argv
        self.name = name
        self.registered = registered
        self.stop_timeout = stop_timeout
        self.poll = poll
        self.up_timeout = up_timeout
        self.files = Files()
        self.current: Generation | None = None
        self.gens: list[Generation] = []  # every worker process still to be waited for
        self.starts: list[float] = []  # of workers that ended on their own
        self._count = 0
        self._dir = Path(".")
        self._stop = threading.Event()
        self._signals = 0

    def handle_signal(self) -> None:
        """SIGTERM or SIGINT: every worker stops (the first signal lets running fires
        finish, a second gives them back), then the supervisor."""
        self._signals += 1
        for gen in list(self.gens):  # the supervisor's thread may be changing the list
            gen.signal(signal.SIGTERM)
        self._stop.set()

    def run(self) -> int:
        self._dir = Path(tempfile.mkdtemp(prefix="cronsvc-reload-"))
        try:
            self.current = self._spawn()
            return self._watch()
        finally:
            self._shutdown()
            shutil.rmtree(self._dir, ignore_errors=True)

    def _spawn(self) -> Generation:
        self._count += 1
        n = self._count
        report = self._dir / f"worker-{n}.json"
        argv = list(self.argv)
        if self.name:  # the first keeps the name; each later one is told apart from it
            argv += ["--name", self.name if n == 1 else f"{self.name}~{n}"]
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, start_new_session=True,
                                env={**os.environ, REPORT_ENV: str(report)})
        gen = Generation(n, proc, report)
        self.gens.append(gen)
        return gen

    def _is_up(self, gen: Generation) -> bool:
        if not gen.up:
            worker = gen.state().get("worker")
            gen.up = bool(worker) and self.registered(str(worker), gen.pid)
        return gen.up

    def _watch(self) -> int:
        while not self._stop.wait(self.poll):
            self._reap()
            current = self.current
            if current is not None:
                self.files.track(reported(current.state()))
                if current.alive():
                    if not current.up and self._is_up(current):
                        log.info("worker pid %d up; watching %d file(s) of its code",
                                 current.pid, len(self.files.stamps))
                elif (code := self._ended(current)) is not None:
                    return code
            changed = self.files.changed()
            if changed and not self._stop.is_set():
                self._swap(changed)
        return 0

    def _ended(self, gen: Generation) -> int | None:
        """The current worker ended on its own: wait for new code if its code did not
        load, start another if it had been up; else the exit code to leave with."""
        code = gen.proc.returncode
        self.current = None
        if code == LOAD_FAILED:
            self.files.track(reported(gen.state()))
            log.error("cannot load the jobs' code: %s; waiting for a change",
                      gen.state().get("error"))
            return None
        # Up once and killed before this loop looked again: registered all the same.
        if not gen.up and not self._is_up(gen):  # a bad file or option: it said why
            return int(code)
        self.starts = [t for t in self.starts if monotonic() - t < RESTART_WINDOW]
        self.starts.append(monotonic())
        if len(self.starts) >= RESTART_LIMIT:
            log.error("worker keeps exiting (last code %s): stopping", code)
            return 1
        log.warning("worker pid %d exited with code %s: starting another", gen.pid, code)
        self.current = self._spawn()
        return None

    def _swap(self, changed: dict[str, Any]) -> None:
        """Start a worker on the new code; once it is up, stop the old one."""
        what = ", ".join(sorted(shown(p) for p in changed))
        for path in changed:  # a pyc as new as an edit in the same second would be used
            if path.endswith(".py"):
                Path(importlib.util.cache_from_source(path)).unlink(missing_ok=True)
        self.files.accept(changed)
        new = self._spawn()
        why = self._await_up(new)
        self.files.track(reported(new.state()))
        old = self.current
        if why is not None:
            runs_on = f"worker pid {old.pid} runs on" if old else "no worker runs"
            log.error("code changed: %s; the new code does not run, %s: %s", what, runs_on,
                      why)
            return
        self.current = new
        if old is None:
            log.info("code changed: %s; worker pid %d up", what, new.pid)
            return
        log.info("code changed: %s; new worker pid %d up, old worker pid %d finishing %d "
                 "run(s)", what, new.pid, old.pid, old.state().get("running", 0))
        old.signal(signal.SIGTERM)

    def _await_up(self, gen: Generation) -> str | None:
        """None once ``gen`` is up; else why it is not (it is then stopped)."""
        deadline = monotonic() + self.up_timeout
        while not self._is_up(gen):
            if not gen.alive():
                error = gen.state().get("error")
                return str(error) if error else f"the new worker exited with code " \
                                                 f"{gen.proc.returncode}"
            if self._stop.is_set() or monotonic() > deadline:
                gen.signal(signal.SIGTERM)
                return "stopping" if self._stop.is_set() else (
                    f"the new worker did not register within {self.up_timeout:.0f}s")
            self._stop.wait(0.1)
        return None

    def _reap(self) -> None:
        """Forget the workers that ended, saying so of the old ones."""
        for gen in [g for g in self.gens if not g.alive()]:
            self.gens.remove(gen)
            if gen is not self.current and gen.up:
                log.info("old worker pid %d stopped (exit code %s)", gen.pid,
                         gen.proc.returncode)

    def _shutdown(self) -> None:
        if self._signals == 0:  # leaving on our own (the worker kept failing)
            for gen in self.gens:
                gen.signal(signal.SIGTERM)
        wait_or_kill([(f"worker pid {g.pid}", g.proc) for g in self.gens], self.stop_timeout)
