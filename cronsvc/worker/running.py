"""What a worker holds: the fires it runs under a lease, and history lines it owes. Its
lease and results threads each say what they use of it (``LeaseHolder`` in leases.py,
``ResultsHolder`` in results.py)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass

from cronsvc.config.models import Job
from cronsvc.history import Cancel, HistoryRecord
from cronsvc.keys import Keys
from cronsvc.kinds import starts_processes
from cronsvc.run.context import FireContext
from cronsvc.run.flag import Flag
from cronsvc.run.watchdog import Leash
from cronsvc.store.scripts import Claim


class Running:
    """One fire this worker holds a lease on.

    One is made per fire claimed, by the claim loop: a plain class, its constructor
    setting what each fire has its own of, what most keep as it was read from the class
    (a dataclass's ``__init__`` sets every field, a ``default_factory`` called for each).
    Compared and hashed by identity: a worker's runs are a set.
    """

    cancel_reason: Cancel | None = None
    started_ms: int = 0
    leash: Leash | None = None  # the process group its run starts, if any, held by the watchdog
    ended: bool = False  # the job has returned; its result may not be recorded yet
    on_stop: Callable[[], None] | None = None  # cancels its task, once it has one
    counted: bool = False  # in the worker's counts of runs going (its claim loop's start)
    # Claimed ahead of its due time: the monotonic time its run starts at (0.0: at once).
    start_at: float = 0.0
    prefetched: bool = False  # claimed beyond the free slots, to wait for one (Worker._prefetch)
    taken: bool = False  # prefetched: a slot took it, or it was given back (under the lock)
    context: FireContext | None = None  # its fire's context, once a Deferred made it

    def __init__(self, claim: Claim, job: Job, keys: Keys, claimed_at: float = 0.0,
                 renewed_at: float = 0.0, on_loop: bool = False, hooked: bool = True,
                 procs: bool | None = None, counted: bool = False) -> None:
        self.claim = claim
        self.job = job
        self.keys = keys
        self.cancel: threading.Event = Flag()  # made per fire: cheap
        self.claimed_at = claimed_at  # local monotonic time the claim was sent
        # Local monotonic time the last renewal that succeeded was sent (the claim is the
        # first): the lease lasts at least until this + lease, whatever Redis's clock says.
        self.renewed_at = renewed_at
        self.on_loop = on_loop  # a task on the worker's event loop, not a slot thread's run
        self.hooked = hooked  # the worker's hooks are told of it (some hook wants its job)
        # Its kind starts processes, held on a leash (the claim loop knows it of the job).
        self.procs = starts_processes(job) if procs is None else procs
        if counted:
            self.counted = True

    @property
    def key(self) -> tuple[str, int]:
        # A fire this worker lost and then reclaimed itself is held twice, by two tokens.
        return (self.claim.fire_id, self.claim.token)

    def __repr__(self) -> str:
        return f"Running({self.claim.fire_id!r}, attempt {self.claim.token})"

    def forget(self) -> None:
        """Its result is recorded: let go of its leash and its task's stop, which refer
        back to it. Unbroken, each such loop is garbage only the cycle collector finds, and
        what a fire leaves behind would cost it a share of full collections."""
        if self.leash is not None:  # most runs have neither: read from the class
            self.leash = None
        if self.on_stop is not None:
            self.on_stop = None

    def stop(self, reason: Cancel) -> None:
        """Ask the run to end, saying why (its history status)."""
        self.cancel_reason = reason
        self.cancel.set()
        if self.on_stop is not None:
            self.on_stop()


@dataclass(frozen=True)
class Note:
    """A history line no run of this worker owns: a fire dropped, a lapsed lease."""

    keys: Keys
    job: str
    record: HistoryRecord


def by_shard(runs: list[Running]) -> dict[Keys, list[Running]]:
    """Runs grouped by the shard their fire is on: one script call per shard."""
    by_keys: dict[Keys, list[Running]] = {}
    for run in runs:
        by_keys.setdefault(run.keys, []).append(run)
    return by_keys
