"""The watchdog process (:mod:`cronsvc.run.watchdog` says why it exists and what it kills).

It reads one ASCII line per message from its stdin until EOF:

- ``?OWNER DEADLINE FIRE ATTEMPT``: process OWNER is starting a command, in a session
  of its own, whose environment holds ``CRONSVC_FIRE_ID=FIRE`` and
  ``CRONSVC_ATTEMPT=ATTEMPT``. Until the group is held, that is how it is found.
- ``+PGID DEADLINE OWNER [FIRE ATTEMPT]``: hold group PGID for process OWNER (the
  command announced as FIRE ATTEMPT, if it was).
- ``=PGID DEADLINE``: move the deadline of a group still held.
- ``-PGID``: release a group (its command ended).
- ``!OWNER``: process OWNER is gone or stopping: kill what it holds or announced.

At a deadline, on EOF, and once orphaned, it kills: a group held with ``killpg``; a
command announced and not held yet by its session, found in ``/proc`` by its
environment (a session leader carrying both entries).

It runs as ``python -I -S`` on this file alone: the standard library only.
"""

from __future__ import annotations

import os
import select
import signal
import sys
import time
from collections.abc import Callable

# How often an idle watchdog checks whether its worker is still its parent.
ORPHAN_CHECK = 2.0
# An announced command is looked for twice, this far apart: one started in the very
# instant of the first look may not have its environment or its session yet.
LOOK_AGAIN = 0.2
# How long messages gather in the pipe after a read before the next: a worker starting
# commands sends three a command, and one wake-up per message took a core from the
# commands and the worker for each. What the watchdog does is due a margin ahead (a
# second, or a fifth of the lease), and it is never more than this late for it.
GATHER = 0.005

Mark = tuple[str, str]  # (fire id, attempt): how an announced command is found


class Held:
    """The groups held and the commands announced, each with its deadline and owner."""

    def __init__(self) -> None:
        self.groups: dict[int, float] = {}
        self.owners: dict[int, int] = {}  # group -> the worker process it is held for
        self.announced: dict[Mark, tuple[float, int]] = {}

    def next_deadline(self) -> float | None:
        deadlines = [*self.groups.values(), *(d for d, _ in self.announced.values())]
        return min(deadlines, default=None)

    def apply(self, line: str) -> None:
        try:
            op, number, *rest = line[:1], *line[1:].split()
            pid = int(number)
            if op == "?":
                self.announced[(rest[1], rest[2])] = (float(rest[0]), pid)
            elif op == "+":
                self.groups[pid] = float(rest[0])
                self.owners[pid] = int(rest[1]) if len(rest) > 1 else 0
                if len(rest) > 3:
                    self.announced.pop((rest[2], rest[3]), None)
            elif op == "=":
                if pid in self.groups:  # one killed at its deadline stays killed
                    self.groups[pid] = float(rest[0])
            elif op == "-":
                self.groups.pop(pid, None)
                self.owners.pop(pid, None)
            elif op == "!":
                self.kill(lambda _deadline, owner: owner == pid,
                          f"its worker process {pid} is gone")
            else:
                raise ValueError(op)
        except (ValueError, IndexError):
            say(f"ignoring a malformed message: {line!r}")

    def kill_due(self, now: float) -> None:
        self.kill(lambda deadline, _owner: deadline <= now,
                  "its lease could not be renewed in time")

    def kill(self, which: Callable[[float, int], bool], why: str) -> None:
        """Kill what ``which(deadline, owner)`` picks, held or announced."""
        for pgid in [g for g, d in self.groups.items() if which(d, self.owners.get(g, 0))]:
            del self.groups[pgid]
            self.owners.pop(pgid, None)
            kill_group(pgid, why)
        marks = [m for m, (d, owner) in self.announced.items() if which(d, owner)]
        for mark in marks:
            del self.announced[mark]
        if marks:
            kill_announced(marks, why)


def serve(fd: int = 0) -> None:
    """Read messages from ``fd`` until EOF, killing what is due."""
    parent = os.getppid()
    held = Held()
    pending = b""
    while True:
        now = time.monotonic()
        held.kill_due(now)
        if os.getppid() != parent:
            held.kill(lambda _d, _o: True, "its worker is gone")
            return
        due = held.next_deadline()
        wait = ORPHAN_CHECK if due is None else min(ORPHAN_CHECK, due - now)
        ready, _, _ = select.select([fd], [], [], max(wait, 0.0))
        if not ready:
            continue
        data = os.read(fd, 65536)
        if not data:
            held.kill(lambda _d, _o: True, "its worker is gone")
            return
        *lines, pending = (pending + data).split(b"\n")
        for line in lines:
            held.apply(line.decode("ascii", "replace"))
        time.sleep(GATHER)


def kill_group(pgid: int, why: str) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        return  # the whole group had ended already
    except OSError as exc:
        say(f"cannot kill process group {pgid}: {exc}")
        return
    say(f"killed process group {pgid}: {why}")


def kill_announced(marks: list[Mark], why: str) -> None:
    """Kill the sessions of the commands announced as ``marks``, looking twice."""
    for look in range(2):
        for pid, mark in sessions(set(marks)):
            kill_group(pid, f"{why} (fire {mark[0]}, attempt {mark[1]}, found by its "
                            "environment)")
        if look == 0:
            time.sleep(LOOK_AGAIN)


def sessions(marks: set[Mark]) -> list[tuple[int, Mark]]:
    """The session leaders whose environment carries one of ``marks``."""
    wanted = {(f"CRONSVC_FIRE_ID={fid}".encode(), f"CRONSVC_ATTEMPT={attempt}".encode()): (
        fid, attempt) for fid, attempt in marks}
    found = []
    try:
        entries = os.listdir("/proc")
    except OSError:  # no procfs: nothing to find them by
        return []
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                session = int(f.read().rsplit(b")", 1)[1].split()[3])
            if session != int(entry):
                continue
            with open(f"/proc/{entry}/environ", "rb") as f:
                env = set(f.read().split(b"\0"))
        except (OSError, IndexError, ValueError):
            continue  # gone meanwhile, or not ours to read
        found += [(int(entry), mark) for (fire, attempt), mark in wanted.items()
                  if fire in env and attempt in env]
    return found


def say(text: str) -> None:
    try:
        print(f"cronsvc watchdog {os.getpid()}: {text}", file=sys.stderr, flush=True)
    except OSError:
        pass  # the worker's log is gone with it; killing still matters


def yield_to_writers() -> None:
    """Let a worker's message wait for the CPU rather than take it from the worker: without
    wakeup preemption (SCHED_BATCH, Linux), a write to this process's pipe no longer hands
    the CPU over mid-write, which cost a command's start 20-120 µs a message on a busy
    machine. What the watchdog does is due a margin ahead (a second or a fifth of the
    lease), far more than its wait for a CPU; it keeps a normal share of the CPU."""
    try:
        os.sched_setscheduler(0, os.SCHED_BATCH, os.sched_param(0))
    except (AttributeError, OSError):
        pass  # not Linux: a normal process


if __name__ == "__main__":
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is for the worker: it decides
    yield_to_writers()
    serve()
