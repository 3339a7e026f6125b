"""Kills a worker's commands when their lease may lapse or their worker is gone.

A command must never run beside the next attempt of its fire. The next attempt
starts once the lease has lapsed on Redis, which happens when the worker dies
(kill -9, OOM) or stops renewing (SIGSTOP, a frozen process, a partition from
Redis). Neither case can be handled by the worker's own threads: a dead or
stopped worker runs no code. So each worker starts one small process of its
own, the watchdog, and tells it over a pipe (the watchdog's stdin) about every
command it runs: the command's process group, and a deadline on
CLOCK_MONOTONIC, which is system-wide and so means the same in both processes.
The worker moves the deadline after each renewal that succeeded.

- At a deadline, the lease may lapse soon: the watchdog SIGKILLs the group.
  A lease lasts at least ``lease`` seconds from the moment its renewal (or
  claim) was sent, so the deadline is that moment + lease - :func:`margin`:
  the kill lands before another worker can claim the fire. The worker itself
  cancels the run one margin earlier (SIGTERM), so a healthy but cut-off
  worker gives its command a chance to stop cleanly.
- On EOF of the pipe the worker is gone (only the worker holds the write end:
  it is close-on-exec and never inherited by commands): the watchdog SIGKILLs
  every group it holds and exits. It also does so when it finds itself
  orphaned, in case a forked child of the worker kept the pipe open.
- Before it starts a command, the worker announces it: its fire and attempt,
  which the command's environment carries, and the same deadline. Until the
  group is held, a kill (at the deadline, or when the worker is gone) finds
  the command's session by that environment in ``/proc``. So the moment
  between a command's start and its registration is covered without a
  wrapper: the command starts with a plain vfork and exec.

Why a process and process groups: each command runs in a session of its own,
so one killpg reaches its children and grandchildren, wherever they were
reparented. A cgroup would hold even processes that leave their group, but
needs a delegated subtree or root and exists only on Linux. A child subreaper
(PR_SET_CHILD_SUBREAPER) keeps orphans under the worker, but does nothing once
the worker itself is dead, and pdeathsig reaches only the direct child (a
command started without a watchdog, or not announced, gets it: see
:mod:`cronsvc.run.processes`). The watchdog runs in a session of its own too, so a signal to the
worker's process group does not take it down, and it depends on none of the
worker's threads.

What escapes: a process that leaves the command's group (setsid, setpgid, a
daemon that double-forks into a new session); what the command started, if the
worker dies between its start and its registration and the command itself has
exited by then (the look in ``/proc`` finds a group by its leader); everything,
when the watchdog is frozen with the worker (a whole VM or host suspended:
CLOCK_MONOTONIC does not run while it is). Processes a command leaves behind
in its group when it exits on its own are not killed.

One watchdog may serve several worker processes (``cronsvc worker --processes N``,
:mod:`cronsvc.worker.prefork`): their supervisor starts it and each worker process
writes to the same pipe, one message per ``write`` (shorter than PIPE_BUF, so never
mixed with another's). Each group is held for the process that started it; when that
process is gone or stopping, every group it still holds is killed at once.

The process and its protocol are in :mod:`cronsvc.run.watchdog_process`;
:class:`Watchdog` is the worker's end.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass

log = logging.getLogger("cronsvc.worker")

_PROCESS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "watchdog_process.py")

Mark = tuple[str, str]  # (fire id, attempt): what finds an announced command


def margin(lease: float) -> float:
    """How long before a lease may lapse its command is killed: room for the kill to
    land, and for the clocks of the worker and Redis to disagree a little."""
    return min(1.0, lease / 5)


# -- the worker's end ------------------------------------------------------------
class Watchdog:
    """The worker's handle on its watchdog process: started by :meth:`start` or the first
    :meth:`hold`, started again (holding every group again) when a message finds it gone.
    Never raises: without a watchdog, a command still dies with its worker's direct child."""

    def __init__(self, channel: int | None = None) -> None:
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[bytes] | None = None
        self._fd = -1  # the write end of self._proc's pipe, while it is ours
        self._held: dict[int, float] = {}
        self._closed = False
        # The write end of a watchdog this process shares with others (their supervisor
        # runs it); None: this process runs its own.
        self._channel = channel

    @property
    def pid(self) -> int | None:
        proc = self._proc
        return None if proc is None or proc.poll() is not None else proc.pid

    def start(self) -> None:
        """Start the watchdog now rather than at the first command: a worker killed while
        its first command starts must find its watchdog running already."""
        with self._lock:
            if not self._closed and self._channel is None and self.pid is None:
                self._start()

    def channel(self) -> int | None:
        """The write end of the running watchdog's pipe, for worker processes to share it
        (it stays this object's: they get a copy)."""
        with self._lock:
            proc = self._proc
            return None if proc is None or proc.stdin is None else proc.stdin.fileno()

    def announce(self, mark: Mark, deadline: float) -> bool:
        """Say that a command whose environment carries ``mark`` is starting: until it is
        held, it is killed at ``deadline`` or with this process. False when no watchdog
        runs to be told."""
        with self._lock:
            if self._closed or (self._channel is None and self._proc is None):
                return False  # never started (or could not be)
            return self._send(f"?{os.getpid()} {deadline:.6f} {mark[0]} {mark[1]}\n")

    def hold(self, pgid: int, deadline: float, mark: Mark | None = None) -> None:
        """Kill group ``pgid`` at ``deadline`` (monotonic), unless moved or released (the
        command announced as ``mark``, if it was)."""
        with self._lock:
            self._held[pgid] = deadline
            self._send(_hold(pgid, deadline, mark))

    def renew(self, pgid: int, deadline: float) -> None:
        """Move the deadline of a group still held; nothing once it is released."""
        with self._lock:
            if self._held.get(pgid, deadline) < deadline:
                self._held[pgid] = deadline
                self._send(f"={pgid} {deadline:.6f}\n")

    def release(self, pgid: int) -> None:
        """Forget a group whose command has ended."""
        with self._lock:
            if self._held.pop(pgid, None) is not None:
                self._send(f"-{pgid}\n")

    def gone(self, pid: int) -> None:
        """Worker process ``pid``, which shared this watchdog, is gone: kill what it held."""
        with self._lock:
            self._send(f"!{pid}\n")

    def close(self) -> None:
        """The worker is stopping: the watchdog kills what is still held and exits (a
        shared one: what this process holds, and it runs on for the others)."""
        with self._lock:
            self._closed = True
            proc, self._proc, self._fd = self._proc, None, -1
            channel, self._channel = self._channel, None
        if channel is not None:
            try:
                _write(channel, f"!{os.getpid()}\n")
            except OSError:
                pass  # gone: it killed what it held then
            os.close(channel)
        if proc is not None:
            _close_quietly(proc)
            try:
                proc.wait(5)
            except subprocess.TimeoutExpired:
                log.warning("watchdog %d did not exit", proc.pid)

    def _send(self, line: str) -> bool:
        """Tell the watchdog ``line``; False if no watchdog could be told. One found gone
        (its pipe broken: nothing else holds the read end) is replaced by a new one, given
        every group held and then ``line``. Nothing is asked of the process otherwise: a
        poll of it per message cost two waitpid calls a command, under the lock."""
        if self._closed:
            return False
        if self._channel is not None:
            try:
                _write(self._channel, line)
                return True
            except OSError as exc:  # the shared one is gone: run one of our own
                log.warning("the shared watchdog is gone (%s); starting this process's own",
                            exc)
                os.close(self._channel)
                self._channel = None
        elif self._fd >= 0:
            try:
                _write(self._fd, line)
                return True
            except OSError:
                pass  # gone: a new one gets every group below
        self._start()
        if self._fd < 0:
            return False
        try:
            _write(self._fd, line)
        except OSError:
            return False
        return True

    def _start(self) -> None:
        """Start a watchdog and hand it every group held."""
        if self._proc is not None:
            log.warning("watchdog %d is gone (%s); starting another", self._proc.pid,
                        self._proc.poll())
            _close_quietly(self._proc)
        self._fd = -1
        try:
            # -I -S: stdlib only, no user site or PYTHON* variables, a quicker start.
            # Its own session: a signal to the worker's process group leaves it running.
            self._proc = subprocess.Popen(
                [sys.executable, "-I", "-S", _PROCESS],
                stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, start_new_session=True,
                bufsize=0)
            assert self._proc.stdin is not None
            _write(self._proc.stdin.fileno(), "".join(
                _hold(pgid, deadline) for pgid, deadline in self._held.items()))
            self._fd = self._proc.stdin.fileno()
        except OSError as exc:
            log.error("cannot run the watchdog, commands may outlive their lease: %s", exc)
            self._proc = None


def _hold(pgid: int, deadline: float, mark: Mark | None = None) -> str:
    told = f" {mark[0]} {mark[1]}" if mark else ""
    return f"+{pgid} {deadline:.6f} {os.getpid()}{told}\n"


def _write(fd: int, text: str) -> None:
    data = text.encode("ascii")
    while data:
        data = data[os.write(fd, data):]


def _close_quietly(proc: subprocess.Popen[bytes]) -> None:
    try:
        if proc.stdin is not None:
            proc.stdin.close()
    except OSError:
        pass
    proc.poll()  # reaps one that is gone


@dataclass
class Leash:
    """One run's process group, held by the watchdog until ``deadline()``, the moment the
    run's lease may lapse. A run of a kind that starts processes (a command) is given one as
    the executor's guard, and tells it when the group exists and when it has ended."""

    watchdog: Watchdog
    deadline: Callable[[], float]
    pgid: int = 0
    mark: Mark | None = None

    def starting(self, env: Mapping[str, str]) -> bool:
        """Announce the command about to start with ``env`` (its fire and attempt); False
        when it cannot be found that way, so it must die with its worker otherwise."""
        fire, attempt = env.get("CRONSVC_FIRE_ID", ""), env.get("CRONSVC_ATTEMPT", "")
        # Each one word: not empty, no white space (split() splits at what isspace() sees).
        if fire.split() != [fire] or attempt.split() != [attempt]:
            return False
        self.mark = (fire, attempt)
        return self.watchdog.announce(self.mark, self.deadline())

    def started(self, pgid: int) -> None:
        self.pgid = pgid
        self.watchdog.hold(pgid, self.deadline(), self.mark)

    def renewed(self) -> None:
        if self.pgid:
            self.watchdog.renew(self.pgid, self.deadline())

    def ended(self, pgid: int) -> None:
        self.watchdog.release(pgid)

