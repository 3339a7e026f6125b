"""``cronsvc worker --processes N``: N claim-and-run processes under one supervisor.

One worker per host, as with gunicorn or Celery's prefork pool: the supervisor starts N
``cronsvc worker`` processes, each a whole :class:`~cronsvc.worker.worker.Worker` (its own
claim loop, slots, leases and event loop), and owns what they share:

- **One watchdog** (:mod:`cronsvc.run.watchdog`). The supervisor runs it; each process
  writes to its pipe. When a process dies, the supervisor tells the watchdog, which kills
  the commands that process held at once; its fires' leases lapse and another claims them.
- **One presence.** Each process reports what it would write to Redis over a pipe of its
  own; the supervisor writes one entry for all of them, under its id: its slots are the
  sum of theirs, and it says how many processes it runs.

A process that dies is started again, after a back-off that doubles while they keep
dying young. One that exits before its first report could not start (a bad file or
option: it said why), and the supervisor stops with its exit code. SIGTERM and SIGINT are
passed on as SIGTERM (a second one too: runs are given back), SIGHUP as SIGHUP.

The processes die with the supervisor, kill -9 included: each asks the kernel for SIGKILL
when its parent dies (PR_SET_PDEATHSIG on Linux) and polls its parent's pid besides. The
watchdog, orphaned then, kills every command it holds. They run in sessions of their own,
so a Ctrl-C reaches only the supervisor, which decides.

The processes are started from the supervisor's main thread only: the kernel sends the
death signal when the *thread* that started a process ends.
"""

from __future__ import annotations

import json
import logging
import os
import select
import signal
import subprocess
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import redis

from cronsvc.clock import monotonic, redis_ms
from cronsvc.keys import Keys
from cronsvc.presence import PRESENCE_EVERY
from cronsvc.process.up import wait_or_kill
from cronsvc.run.watchdog import Watchdog
from cronsvc.store.faults import REDIS_ERRORS, describe
from cronsvc.store.replies import compact

log = logging.getLogger("cronsvc.worker")

#: Tells a process that it is one of a supervisor's: JSON of :class:`Forked`'s fields.
FORKED_ENV = "CRONSVC_FORKED"
#: A process that lived this long before it died is started again at once.
SETTLED = 60.0
#: The back-off before a process that died young is started again: doubles up to this.
MAX_BACKOFF = 30.0
FIRST_BACKOFF = 0.5
#: How often a process checks that its supervisor is still its parent (seconds).
PARENT_CHECK = 1.0


# -- a process of several ------------------------------------------------------------
@dataclass(frozen=True)
class Forked:
    """What a worker process learns from its supervisor."""

    parent: int  # the supervisor's pid
    index: int  # 1..N
    of: str  # the supervisor's worker id: the one the fleet sees
    watchdog: int  # write end of the shared watchdog's pipe (-1: none)
    report: int  # write end of this process's pipe to the supervisor

    @property
    def worker_id(self) -> str:
        return f"{self.of}/{self.index}"

    @classmethod
    def from_env(cls) -> Forked | None:
        """This process's, when a supervisor started it (not passed on to its commands)."""
        raw = os.environ.pop(FORKED_ENV, None)
        return None if raw is None else cls(**json.loads(raw))

    def attach(self, die_with_parent: Callable[[], None] | None) -> None:
        """Die with the supervisor; keep the pipes from the commands this process starts."""
        for fd in (self.watchdog, self.report):
            if fd >= 0:
                os.set_inheritable(fd, False)
        if die_with_parent is not None:
            die_with_parent()
        # Gone before the kernel was asked, or no kernel to ask: the poll sees to it.
        threading.Thread(target=self._watch_parent, name="cronsvc-parent", daemon=True).start()

    def _watch_parent(self) -> None:
        while os.getppid() == self.parent:
            threading.Event().wait(PARENT_CHECK)
        os.kill(os.getpid(), signal.SIGKILL)

    def watchdog_end(self) -> Watchdog:
        return Watchdog(channel=self.watchdog if self.watchdog >= 0 else None)

    def send(self, info: dict[str, Any]) -> None:
        """Tell the supervisor what this process would write as its presence."""
        try:
            os.write(self.report, (json.dumps(info) + "\n").encode())
        except OSError:
            pass  # the supervisor is gone: this process follows it


# -- the supervisor -------------------------------------------------------------------
@dataclass
class Process:
    """One worker process of the supervisor, and the one after it when it dies."""

    index: int
    proc: subprocess.Popen[bytes] | None = None
    pipe: int = -1  # read end of its reports
    pending: bytes = b""
    info: dict[str, Any] | None = None  # its last report: it is up once it sent one
    started: float = 0.0
    backoff: float = 0.0
    start_at: float | None = None  # when it is to be started (again)
    was_up: bool = False

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None


@dataclass
class Prefork:
    """Runs ``processes`` worker processes (``argv(index)``) as the one worker ``worker_id``."""

    argv: Callable[[int], list[str]]
    processes: int
    worker_id: str
    client: redis.Redis
    keys: Keys  # the first shard's: presence lives there
    stop_timeout: float = 60.0
    env: dict[str, str] = field(default_factory=lambda: dict(os.environ))
    first_env: dict[str, str] = field(default_factory=dict)  # for process 1 only (--reload)
    children: list[Process] = field(default_factory=list)
    code: int = 0
    _stopping: threading.Event = field(default_factory=threading.Event)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _watchdog: Watchdog = field(default_factory=Watchdog)
    _said: float = -PRESENCE_EVERY
    _outage: bool = False

    # -- signals (from a thread of their own) ------------------------------------
    def handle_stop(self) -> None:
        """SIGTERM or SIGINT: each process stops (a second signal: at once)."""
        with self._lock:
            self._stopping.set()
            self._signal_all(signal.SIGTERM)

    def handle_reload(self) -> None:
        with self._lock:
            self._signal_all(signal.SIGHUP)

    def _signal_all(self, sig: int) -> None:
        for child in self.children:
            if child.alive():
                assert child.proc is not None
                child.proc.send_signal(sig)

    # -- the main thread ---------------------------------------------------------
    def run(self) -> int:
        self._watchdog.start()
        self.children = [Process(i, start_at=0.0) for i in range(1, self.processes + 1)]
        log.info("worker %s: %d processes", self.worker_id, self.processes)
        try:
            while not (self._stopping.is_set() and not any(c.alive() for c in self.children)):
                self._start_due()
                self._read(0.5)
                self._reap()
                if monotonic() - self._said >= PRESENCE_EVERY:
                    self._presence()
        finally:
            self._shutdown()
        return self.code

    def _start_due(self) -> None:
        now = monotonic()
        for child in self.children:
            if child.start_at is not None and child.start_at <= now:
                with self._lock:
                    if not self._stopping.is_set():
                        self._start(child)

    def _start(self, child: Process) -> None:
        self._watchdog.start()  # again if it died: the processes started now share a new one
        channel = self._watchdog.channel()
        read, write = os.pipe()
        forked = Forked(os.getpid(), child.index, self.worker_id,
                        -1 if channel is None else channel, write)
        env = {**self.env, **(self.first_env if child.index == 1 else {}),
               FORKED_ENV: json.dumps(forked.__dict__)}
        try:
            child.proc = subprocess.Popen(
                self.argv(child.index), stdin=subprocess.DEVNULL, env=env,
                pass_fds=[fd for fd in (channel, write) if fd is not None],
                start_new_session=True)
        except OSError as exc:
            os.close(read)
            log.error("cannot start worker process %d: %s", child.index, exc)
            child.start_at = monotonic() + MAX_BACKOFF
            return
        finally:
            os.close(write)
        child.pipe, child.pending, child.info = read, b"", None
        child.started, child.start_at = monotonic(), None

    def _read(self, timeout: float) -> None:
        """Take in the reports that arrive within ``timeout``."""
        pipes = {c.pipe: c for c in self.children if c.pipe >= 0}
        if not pipes:
            self._stopping.wait(timeout)
            return
        try:
            ready, _, _ = select.select(list(pipes), [], [], timeout)
        except InterruptedError:
            return
        for fd in ready:
            child = pipes[fd]
            data = os.read(fd, 65536)
            if not data:  # it is gone: reaped below
                os.close(fd)
                child.pipe = -1
                continue
            *lines, child.pending = (child.pending + data).split(b"\n")
            for line in lines[-1:]:  # only the newest says what it is now
                try:
                    child.info = dict(json.loads(line))
                except (ValueError, TypeError):
                    continue
                if not child.was_up:
                    child.was_up = True
                    self._said = -PRESENCE_EVERY  # up: the fleet hears of it at once

    def _reap(self) -> None:
        for child in self.children:
            proc = child.proc
            if proc is None or proc.poll() is None:
                continue
            child.proc = None
            if child.pipe >= 0:
                os.close(child.pipe)
                child.pipe = -1
            self._watchdog.gone(proc.pid)  # the commands it still held die with it
            self._ended(child, proc.pid, proc.returncode)

    def _ended(self, child: Process, pid: int, code: int) -> None:
        if self._stopping.is_set():
            return
        if child.info is None and not child.was_up:
            # It never started to work: a bad file or option (it said why), or code that
            # does not import (under --reload). Another start would end the same way.
            log.error("worker process %d (pid %d) exited with code %s before it started: "
                      "stopping", child.index, pid, code)
            self.code = code or 1
            self.handle_stop()
            return
        lived = monotonic() - child.started
        child.backoff = 0.0 if lived >= SETTLED else min(
            max(child.backoff * 2, FIRST_BACKOFF), MAX_BACKOFF)
        child.info = None
        child.start_at = monotonic() + child.backoff
        log.warning("worker process %d (pid %d) exited with code %s: starting another%s",
                    child.index, pid, code,
                    f" in {child.backoff:.1f}s" if child.backoff else "")

    # -- presence ----------------------------------------------------------------
    def info(self) -> dict[str, Any] | None:
        """The presence of all the processes as one worker's; None before one is up."""
        reports = [c.info for c in self.children if c.info is not None and c.alive()]
        if not reports:
            return None
        errors = [r["last_error"] for r in reports if isinstance(r.get("last_error"), dict)]
        return {**reports[0],
                **{k: sum(int(r.get(k) or 0) for r in reports)
                   for k in ("busy", "slots", "awaiting")},
                "pid": os.getpid(), "processes": len(reports),
                "pids": [r.get("pid") for r in reports],
                "last_error": max(errors, key=lambda e: e.get("at") or 0, default=None)}

    def _presence(self) -> None:
        info = self.info()
        if info is None:
            return
        try:
            now = redis_ms(self.client)
            pipe = self.client.pipeline(transaction=False)
            pipe.zadd(self.keys.workers, {self.worker_id: now})
            pipe.hset(self.keys.worker_info, self.worker_id, compact(info))
            pipe.execute()
            self._said, self._outage = monotonic(), False
        except REDIS_ERRORS as exc:
            if not self._outage:
                log.warning("cannot record presence: %s", describe(exc))
            self._outage = True
            self._said = monotonic()

    def _shutdown(self) -> None:
        with self._lock:
            if not self._stopping.is_set():  # not asked to: the processes stop too
                self._stopping.set()
                self._signal_all(signal.SIGTERM)
        wait_or_kill([(f"worker process {c.index}", c.proc) for c in self.children
                      if c.proc is not None], self.stop_timeout)
        for child in self.children:
            if child.pipe >= 0:
                os.close(child.pipe)
        self._watchdog.close()  # kills what a process killed above left
        try:
            pipe = self.client.pipeline(transaction=False)
            pipe.zrem(self.keys.workers, self.worker_id)
            pipe.hdel(self.keys.worker_info, self.worker_id)
            pipe.execute()
        except REDIS_ERRORS:
            pass
        log.info("worker %s stopped", self.worker_id)
