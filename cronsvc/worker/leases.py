"""A worker's leases: renewed while its runs go on, and runs stopped before a lease lapses.

Two threads. The lease thread renews every held lease a third of a lease apart, and
after a renewal that failed tries again every :data:`RETRY_S` until one succeeds; the
fence thread never waits on Redis and stops a run one margin before its watchdog would
kill it, so a run whose lease may lapse (another worker may take the fire over then)
ends in time even while a renewal hangs on a lost connection.

A Redis fault (down, OOM, READONLY) therefore costs a run nothing when it ends before the
fence: ``lease - 2 * margin`` after the last renewal that succeeded. The last one was at
most a period before the fault began, so every fault shorter than :func:`ridden_out`
is ridden out, wherever it falls.
"""

from __future__ import annotations

import logging
import threading
from typing import Protocol

from cronsvc.clock import monotonic
from cronsvc.history import Cancel
from cronsvc.run.watchdog import margin
from cronsvc.store.faults import REDIS_ERRORS, describe
from cronsvc.store.scripts import Scripts
from cronsvc.worker.running import Running, by_shard

log = logging.getLogger("cronsvc.worker")
# A claim younger than lease_ms / UNCHECKED seconds (a heartbeat period) starts without a
# look at Redis: the lease granted with it still runs for 2/3 of its length.
UNCHECKED = 3000

#: Seconds between renewals after one failed: a short fault must not wait out a period.
RETRY_S = 0.25


def period(lease_s: float) -> float:
    """Seconds between renewals while they succeed."""
    return max(lease_s / 3, 0.05)


def ridden_out(lease_s: float) -> float:
    """The longest Redis fault every run of a worker with this lease rides out: the fence
    stops a run ``lease - 2 * margin`` after its last good renewal, which may have been a
    period before the fault, and the first renewal after it may come a retry later."""
    return lease_s - 2 * margin(lease_s) - period(lease_s) - RETRY_S


class LeaseHolder(Protocol):
    """What the lease and fence threads use of their worker."""

    scripts: Scripts
    lease_ms: int
    stopping: threading.Event  # no more claims
    hard_stopped: threading.Event  # runs stop now; nothing waits on Redis any more

    def running(self) -> list[Running]: ...

    def noted(self, exc: BaseException) -> None: ...


class Leases:
    """Keeps the leases of one worker's runs, and fences off runs whose lease may lapse."""

    def __init__(self, worker: LeaseHolder, margin_s: float) -> None:
        self.w = worker
        self.margin = margin_s  # how long before a lease may lapse its command is killed

    def kill_at(self, run: Running) -> float:
        """When the watchdog kills the run's command: one margin before its lease may lapse."""
        return run.renewed_at + self.w.lease_ms / 1000 - self.margin

    # -- renewing ---------------------------------------------------------------
    def renew_loop(self) -> None:
        w = self.w
        every = period(w.lease_ms / 1000)
        failed = 0  # renewals failed in a row
        while not w.hard_stopped.wait(RETRY_S if failed else every):
            if w.stopping.is_set() and not w.running():
                return
            try:
                self.renew_once()
            except REDIS_ERRORS as exc:
                # Runs go on; a lease that cannot be renewed in time is fenced off.
                w.noted(exc)
                if not failed:
                    log.warning("lease renewal failed, trying again every %.2fs: %s",
                                RETRY_S, describe(exc))
                failed += 1
                continue
            if failed:
                log.info("leases renewed again after %d failed tries", failed)
            failed = 0

    def renew_once(self) -> None:
        """Renew every lease this worker holds; stop the runs whose fire is not theirs."""
        w = self.w
        for keys, group in by_shard(w.running()).items():
            sent = monotonic()
            results = w.scripts.heartbeat(
                keys, w.lease_ms, [(r.claim.fire_id, r.claim.token) for r in group]
            )
            for run, result in zip(group, results, strict=True):
                if result:  # renewed, also when the run is to stop (2)
                    run.renewed_at = max(run.renewed_at, sent)
                    if run.leash is not None:
                        run.leash.renewed()
                if result == 1 or run.cancel.is_set():
                    continue
                run.stop(Cancel.REPLACED if result == 2 else Cancel.LEASE_LOST)
                log.warning("%s: stopping run: %s", run.claim.fire_id, run.cancel_reason)

    def still_held(self, run: Running) -> bool:
        """Whether the lease of a claim is still this worker's, checked before the run
        starts when the claim is older than a heartbeat period: a claim that waited
        (Redis went away right after it) may have lapsed and been taken over, and
        starting it then would run the fire twice."""
        w = self.w
        if monotonic() - run.claimed_at < w.lease_ms / UNCHECKED:
            return True  # the lease granted with the claim still runs for 2/3 of its length
        sent = monotonic()
        try:
            [held] = w.scripts.heartbeat(
                run.keys, w.lease_ms, [(run.claim.fire_id, run.claim.token)])
        except REDIS_ERRORS as exc:
            w.noted(exc)
            held = 0
            reason = f"cannot renew its lease: {describe(exc)}"
        else:
            reason = "its lease was taken over before it started"
        if held == 2 and not run.cancel.is_set():
            run.stop(Cancel.REPLACED)  # replaced meanwhile: it ends at once and says so
        if held:
            run.renewed_at = max(run.renewed_at, sent)
            return True
        log.warning("%s: not started, %s", run.claim.fire_id, reason)
        return False

    # -- fencing ----------------------------------------------------------------
    def fence_loop(self) -> None:
        """Stop every run one margin before the watchdog would kill it: its lease could
        not be renewed in time, and another worker may take the fire over once it lapses.
        This thread never waits on Redis, so a renewal stuck on a lost connection cannot
        hold it up; the cancel ends a command with SIGTERM (a call is only told), and its
        result is not recorded (a later one would be rejected by its fencing token)."""
        w = self.w
        while not w.hard_stopped.is_set():
            wait = w.lease_ms / 3000
            now = monotonic()
            for run in w.running():
                left = self.kill_at(run) - self.margin - now
                if left > 0:
                    wait = min(wait, left)
                elif not (run.ended or run.cancel.is_set()):
                    log.warning("%s: stopping run: lease not renewed for %.1fs, it may lapse",
                                run.claim.fire_id, now - run.renewed_at)
                    run.stop(Cancel.LEASE_LOST)
            w.hard_stopped.wait(wait)
