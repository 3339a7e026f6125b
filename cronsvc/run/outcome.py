"""What a run of any kind is given and gives back: the :class:`Stop` that ends it early,
the :class:`Result` its kind reports, the :class:`Outcome` the worker records.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, NamedTuple, Protocol

from cronsvc.clock import monotonic

if TYPE_CHECKING:
    from cronsvc.run.dispatch import Outcomes
    from cronsvc.run.output import Kept

Status = Literal["ok", "failed", "timeout", "cancelled"]
How = Literal["done", "cancelled", "timeout"]

SLICE = 0.1  # how often a wait looks at the cancel event
OUTPUT_CAP = 4096  # an HTTP answer or a call's return value is cut to this much


@dataclass(frozen=True)
class Outcome:
    """The result of one run.

    `exit_code` is the process's return code (negative: killed by that signal),
    None for call jobs and commands that could not start. `output` is the head and
    tail of the output (commands, :mod:`cronsvc.run.output`), or of what a call printed
    and logged followed by the repr of its return value or its traceback (calls). `error`
    is a one-line reason when the status is not "ok".
    """

    status: Status
    started_ms: int
    duration_ms: int
    exit_code: int | None = None
    output: str = ""
    error: str | None = None


class Result(NamedTuple):
    """What a kind reports of one run; the executor adds when it started and how long
    it took (:class:`Outcome`)."""

    status: Status
    exit_code: int | None = None
    output: str = ""
    error: str | None = None


class Done(Protocol):
    """What a run waits for: an :class:`threading.Event`, or what waits like one."""

    def wait(self, timeout: float | None = None) -> bool: ...


class Guard(Protocol):
    """Told of a command before it starts (True: it can find it by ``env`` from then on),
    its process group once it runs, and once it has ended."""

    def starting(self, env: Mapping[str, str]) -> bool: ...

    def started(self, pgid: int) -> None: ...

    def ended(self, pgid: int) -> None: ...


@dataclass(frozen=True)
class Stop:
    """What ends a run before it returns on its own: ``cancel`` (set on a cancel, a lease
    lost or a shutdown), the job's ``timeout`` (from ``deadline``, on the monotonic clock),
    and, for the processes a run starts, the worker's watchdog through ``guard``. A fire
    handed to another system learns its outcome through ``outcomes``. The output of a
    command or a call goes to ``output`` (its head and tail kept, each chunk fed to
    whoever follows it)."""

    cancel: threading.Event
    timeout: float | None = None
    deadline: float | None = None
    guard: Guard | None = None
    outcomes: Outcomes | None = None
    output: Kept | None = None

    def wait(self, done: Done) -> How:
        """Block until ``done``, a cancel or the deadline, and say which came first."""
        while True:
            if done.wait(self.next_look()):
                return "done"
            how = self.ended()
            if how is not None:
                return how

    def next_look(self) -> float:
        """Seconds until a wait should look at the cancel and the deadline again."""
        remaining = None if self.deadline is None else self.deadline - monotonic()
        return SLICE if remaining is None else max(min(SLICE, remaining), 0)

    def ended(self) -> How | None:
        """"cancelled" or "timeout" once the run must end (a cancel first), else None: for
        a wait of another kind than :meth:`wait` (an event loop's)."""
        if self.cancel.is_set():
            return "cancelled"
        if self.deadline is not None and monotonic() >= self.deadline:
            return "timeout"
        return None

    def pause(self, seconds: float) -> How:
        """Wait ``seconds`` unless a cancel or the deadline comes first ("done": it did
        not)."""
        until = monotonic() + seconds
        while True:
            how = self.ended()
            if how is not None:
                return how
            now = monotonic()
            if now >= until:
                return "done"
            ends = until if self.deadline is None else min(until, self.deadline)
            self.cancel.wait(min(SLICE, ends - now))

    def stopped(self, how: How) -> Result:
        """The result of a run ended by a timeout or a cancel, as ``how`` says."""
        if how == "timeout":
            return Result("timeout", error=f"timed out after {self.timeout:g}s")
        return Result("cancelled", error="cancelled")

