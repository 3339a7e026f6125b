"""The worker: claim due fires, run them, keep their leases, ack or fail.

One thread claims and sleeps, a pool runs the jobs, one thread renews leases,
one stops runs whose lease may lapse, one listens for wake-ups, one records
results; a watchdog process kills commands its worker can no longer stop
(see :mod:`cronsvc.run.watchdog`). All scheduling decisions use
Redis server time: the claim script returns the server's clock and the next
due time, and the worker sleeps for the difference, measured on its own
monotonic clock, so its wall clock may be wrong by any amount.

A worker runs only the jobs of its own file, and a fire only with the
definition the planners published for it: it writes the definitions it holds
to Redis, and the claim script leaves other fires to workers that hold theirs.
It reloads its file on change and on SIGHUP, keeping the last good one.

No Redis error ends a worker: a lost connection or a reply meaning "not now"
(OOM, READONLY, ...) is an outage it backs off from, keeping its runs going.
"""

from __future__ import annotations

import hashlib
import logging
import os
import queue
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import redis

from cronsvc.clock import SYSTEM, Clock, monotonic
from cronsvc.config.models import Config, Job
from cronsvc.config.watch import FileWatch, reread
from cronsvc.errors import LeaseLost
from cronsvc.keys import Keys, all_shards, keys_for
from cronsvc.metrics.counters import NO_METRICS, Metrics
from cronsvc.presence import PRESENCE_EVERY
from cronsvc.process.logs import batched_lines
from cronsvc.run.context import FireContext
from cronsvc.run.executor import Outcome, execute
from cronsvc.run.watchdog import Leash, Watchdog, margin
from cronsvc.store.faults import REDIS_ERRORS, ErrorLog, is_outage
from cronsvc.store.scripts import Claim, Scripts
from cronsvc.worker.records import (
    drop_record,
    history_record,
    log_dropped,
    log_outcome,
    lost_record,
)
from cronsvc.worker.slots import Slots

log = logging.getLogger("cronsvc.worker")

# A sleeping worker looks at Redis at least this often even without a wake-up
# message (messages can be lost while a connection is re-established). It
# otherwise sleeps until the next due fire or lease deadline the claim reports,
# so this only bounds the delay after a lost message; it is also most of what
# an idle worker costs Redis.
MAX_SLEEP = 5.0
# While Redis cannot be reached, it is tried again at most this far apart.
OUTAGE_RETRY = 2.0
# Due fires examined per claim, so `catch_up: latest` sees a job's newer fires.
SCAN_LIMIT = 200
# How long a finished run's result is retried while Redis cannot be reached.
RESULT_PATIENCE = 120.0
# How long a stopping worker waits for cancelled runs to end before it gives their fires
# back: commands get KILL_GRACE after SIGTERM; calls without a timeout cannot be stopped.
STOP_WAIT = 10.0
CALL_STOP_WAIT = 1.0
# Results recorded in one round trip at most.
RESULT_BATCH = 500
# The definitions a worker holds expire unless it renews them this often (a worker gone
# without a word must not keep fires waiting for it).
HELD_TTL = 600
HELD_RENEW_EVERY = 60.0
T = TypeVar("T")


def default_worker_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


@dataclass
class Running:
    """One fire this worker holds a lease on."""

    claim: Claim
    job: Job
    keys: Keys
    cancel: threading.Event = field(default_factory=threading.Event)
    cancel_reason: str = ""
    started_ms: int = 0
    claimed_at: float = 0.0  # local monotonic time the claim was sent
    # Local monotonic time the last renewal that succeeded was sent (the claim is the
    # first): the lease lasts at least until this + lease, whatever Redis's clock says.
    renewed_at: float = 0.0
    leash: Leash | None = None  # a command's process group, held by the watchdog
    ended: bool = False  # the job has returned; its result may not be recorded yet

    @property
    def key(self) -> tuple[str, int]:
        # A fire this worker lost and then reclaimed itself is held twice, by two tokens.
        return (self.claim.fire_id, self.claim.token)


@dataclass(frozen=True)
class Note:
    """A history line no run of this worker owns: a fire dropped, a lapsed lease."""

    keys: Keys
    job: str
    record: dict[str, Any]


def held_digest(config: Config) -> str:
    """Names the set of definitions a worker holds: workers with the same jobs share it."""
    text = "\n".join(f"{name}={job.definition}" for name, job in sorted(config.jobs.items()))
    return hashlib.sha256(text.encode()).hexdigest()[:12]


class Worker:
    """Claims and runs fires of the jobs in its own config, and only those."""

    def __init__(
        self,
        config: Config,
        client: redis.Redis,
        *,
        concurrency: int | None = None,
        worker_id: str | None = None,
        lease: float | None = None,
        grace: float | None = None,
        clock: Clock = SYSTEM,
        metrics: Metrics | None = None,
        config_path: str | Path | None = None,
    ) -> None:
        self.config = config
        # Reloaded on change and SIGHUP (none: a worker built from a Config in code).
        self.config_path = config_path
        self.held = held_digest(config)
        self.client = client
        self.scripts = Scripts(client)
        self.concurrency = concurrency or config.worker.concurrency
        self.worker_id = worker_id or default_worker_id()
        self.lease_ms = int((lease or config.worker.lease) * 1000)
        self.grace = config.worker.grace if grace is None else grace
        self.history_cap = config.worker.history
        self.clock = clock
        self.shards = all_shards(config.redis.shards, config.redis.prefix)
        self._rotation = 0
        self._running: dict[tuple[str, int], Running] = {}
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._hard_stop = threading.Event()
        self._pool = Slots(self.concurrency, "cronsvc-run")
        # (run, outcome) of finished runs and notes, for the results thread; None ends it.
        self._results: queue.SimpleQueue[tuple[Running, Outcome] | Note | None] = (
            queue.SimpleQueue())
        self._results_thread = threading.Thread(
            target=self._record_results, name="cronsvc-results", daemon=True)
        self._offset_ms = 0  # server clock minus local clock, from the last claim
        self._held_at = -HELD_RENEW_EVERY  # monotonic time the held definitions were written
        self._held_shards: list[Keys] = []  # the shards where it wrote them
        self._reload_asked = threading.Event()
        self.errors = ErrorLog(clock)
        self.runs_finished = 0
        self.metrics = metrics or NO_METRICS
        self.metrics.worker_slots(self._busy, self.concurrency)
        self._margin = margin(self.lease_ms / 1000)
        self._watchdog = Watchdog()

    # -- public ------------------------------------------------------------
    def stop(self) -> None:
        """First call: stop claiming, let runs finish within the grace period.
        Second call: stop the runs now and give their fires back."""
        if self._stopping.is_set():
            self._hard_stop.set()
        self._stopping.set()
        self._wake.set()

    def request_reload(self) -> None:
        """Read the job file again at the next turn of the claim loop (SIGHUP, a change)."""
        self._reload_asked.set()
        self._wake.set()

    def reload(self) -> bool:
        """Load the job file again if it changed; True if a new config is in force.

        A broken file is logged, one located problem per line, and the last good
        config stays. Runs in progress keep the definition they started with.
        """
        if self.config_path is None:
            return False
        config = reread(self.config_path, self.config, log)
        if config is None:
            return False
        if (config.redis, config.worker) != (self.config.redis, self.config.worker):
            log.warning("%s: redis and worker settings take effect at the next start",
                        self.config_path)
            config = config.model_copy(update={"redis": self.config.redis,
                                               "worker": self.config.worker})
        self.config, self.held = config, held_digest(config)
        self._held_at = -HELD_RENEW_EVERY  # write the new definitions at once
        log.info("reloaded %s: %d jobs", self.config_path, len(config.jobs))
        return True

    def run_forever(self) -> None:
        threads = [
            threading.Thread(target=self._listen, name="cronsvc-wakeup", daemon=True),
            threading.Thread(target=self._heartbeat_loop, name="cronsvc-lease", daemon=True),
            threading.Thread(target=self._fence_loop, name="cronsvc-fence", daemon=True),
        ]
        for t in (*threads, self._results_thread):
            t.start()
        if any(job.command for job in self.config.jobs.values()):
            self._watchdog.start()
        watch = FileWatch(self.config_path, self.request_reload) if self.config_path else None
        if watch is not None:
            watch.start()
        log.info("worker %s started: %d slots, lease %.0fs, %d jobs",
                 self.worker_id, self.concurrency, self.lease_ms / 1000, len(self.config.jobs))
        try:
            self._loop()
        finally:
            if watch is not None:
                watch.stop()
            self._shutdown()

    # -- claiming ----------------------------------------------------------
    def _loop(self) -> None:
        last_presence = -PRESENCE_EVERY
        outage = 0.0  # current back-off while Redis cannot be reached
        while not self._stopping.is_set():
            if self._reload_asked.is_set():
                self._reload_asked.clear()
                if self.reload():
                    self.metrics.worker_slots(self._busy, self.concurrency)
            if monotonic() - last_presence >= PRESENCE_EVERY:
                self._presence()
                last_presence = monotonic()
            self._wake.clear()
            if monotonic() - self._held_at >= HELD_RENEW_EVERY:
                self.write_held()
            try:
                wait = self.claim_once()
                outage = 0.0
            except REDIS_ERRORS as exc:
                # Redis restarting, failing over or refusing writes (OOM, READONLY): keep
                # the running jobs, claim again later.
                self._noted(exc)
                if not outage:
                    log.warning("cannot claim, retrying: %s", exc)
                outage = min(max(outage * 2, 0.25), OUTAGE_RETRY)
                wait = outage
            if wait > 0 and not self._stopping.is_set():
                self._wake.wait(wait)

    def write_held(self) -> None:
        """Write the definitions this worker holds, per shard, for the claim script."""
        by_shard: dict[Keys, dict[Any, Any]] = {k: {} for k in self.shards}
        for name, job in self.config.jobs.items():
            keys = keys_for(name, self.config.redis.shards, self.config.redis.prefix)
            by_shard.setdefault(keys, {})[name] = job.definition
        failed = 0
        self._held_shards = [keys for keys, held in by_shard.items() if held]
        for keys, held in by_shard.items():
            if not held:
                continue
            try:
                pipe = self.client.pipeline(transaction=False)
                pipe.hset(keys.held(self.held), mapping=held)
                pipe.expire(keys.held(self.held), HELD_TTL)
                pipe.execute()
            except REDIS_ERRORS as exc:  # one shard down must not stop the others
                self._noted(exc)
                failed += 1
        # All written: renew in a while; else try the missing shards again at the next turn.
        if not failed:
            self._held_at = monotonic()

    def _noted(self, exc: BaseException) -> None:
        """Remember a Redis error for status and metrics."""
        self.metrics.redis_error(self.errors.note(exc))

    def claim_once(self) -> float:
        """Claim up to the free slots from every shard; return seconds to sleep."""
        wake_at: float | None = None  # monotonic time of the earliest next fire
        failed: list[Exception] = []
        n = len(self.shards)
        start = self._rotation
        self._rotation = (self._rotation + 1) % n  # no shard always goes first
        for i in range(n):
            free = self.concurrency - self._busy()
            if free <= 0:
                return MAX_SLEEP  # a finishing run sets _wake
            keys = self.shards[(start + i) % n]
            t0 = monotonic()
            try:
                res = self.scripts.claim(
                    keys, self.worker_id, batch=free, lease_ms=self.lease_ms,
                    scan_limit=max(SCAN_LIMIT, free), held=keys.held(self.held),
                )
            except REDIS_ERRORS as exc:
                # One shard down (a cluster master failing over) must not stop the others.
                self._noted(exc)
                failed.append(exc)
                if len(failed) == n:
                    raise
                continue
            t1 = monotonic()
            # The server's clock is the only clock: remember how far ours is off.
            self._offset_ms = int(res.now_ms + (t1 - t0) * 500 - self.clock.now_ms())
            # Start first: recording drops talks to Redis, and a claim must not age meanwhile.
            for claim in res.claimed:
                self._start(keys, claim, t0)
            for claim in res.claimed:
                if claim.before is not None:
                    self._reclaimed(keys, claim)
            for fid, reason in res.dropped:
                self._record_drop(fid, reason)
            if res.next_ms >= 0:
                at = t1 + (res.next_ms - res.now_ms) / 1000
                wake_at = at if wake_at is None else min(wake_at, at)
        if failed:
            log.warning("%d of %d shard(s) cannot be claimed from: %s", len(failed), n, failed[0])
        if wake_at is None:
            return MAX_SLEEP
        return min(MAX_SLEEP, max(wake_at - monotonic(), 0.0))

    def _start(self, keys: Keys, claim: Claim, claimed_at: float) -> None:
        job = self.config.jobs.get(claim.job)
        if job is None:
            # Redis names the job; only this worker's own config says what it runs. The claim
            # only gives it fires of definitions it holds, so this is a reload in between:
            # give the fire back at once, attempt not counted, for a worker that has it.
            self._hand_back(keys, claim)
            return
        # The lease began after claimed_at, the moment the claim was sent.
        run = Running(claim=claim, job=job, keys=keys, claimed_at=claimed_at,
                      renewed_at=claimed_at)
        with self._lock:
            self._running[run.key] = run
        self._pool.submit(self._run, run)

    def _run(self, run: Running) -> None:
        claim = run.claim
        ctx = FireContext(
            job=claim.job, fire_id=claim.fire_id, scheduled_ms=claim.due_ms,
            attempt=claim.token, worker=self.worker_id, payload=claim.payload,
        )
        outcome = None
        if run.job.command:
            run.leash = Leash(self._watchdog, lambda: self._kill_at(run))
        try:
            if self._still_held(run):
                outcome = execute(run.job, ctx, cancel=run.cancel, clock=self.clock,
                                  guard=run.leash)
        except Exception:  # the run loop must survive anything a job does
            log.exception("run of %s crashed the worker thread", claim.fire_id)
        run.ended = True
        self._wake.set()
        if outcome is None:
            self._free(run)
        else:
            self._results.put((run, outcome))

    def _busy(self) -> int:
        """Slots taken: runs started and not ended. A run frees its slot when it ends, so
        claiming goes on while its result is written (its lease is still renewed)."""
        with self._lock:
            return sum(not run.ended for run in self._running.values())

    def _free(self, run: Running) -> None:
        with self._lock:
            self._running.pop(run.key, None)
        self.runs_finished += 1

    def _still_held(self, run: Running) -> bool:
        """Whether the lease of a claim is still this worker's, checked before the run
        starts when the claim is older than a heartbeat period: a claim that waited
        (Redis went away right after it) may have lapsed and been taken over, and
        starting it then would run the fire twice."""
        if monotonic() - run.claimed_at < self.lease_ms / 3000:
            return True  # the lease granted with the claim still runs for 2/3 of its length
        sent = monotonic()
        try:
            [held] = self.scripts.heartbeat(
                run.keys, self.lease_ms, [(run.claim.fire_id, run.claim.token)])
        except REDIS_ERRORS as exc:
            self._noted(exc)
            held = 0
            reason = f"cannot renew its lease: {exc}"
        else:
            reason = "its lease was taken over before it started"
        if held == 2 and not run.cancel.is_set():
            # Replaced meanwhile: the run ends at once and its result says so.
            run.cancel_reason = "replaced"
            run.cancel.set()
        if held:
            run.renewed_at = max(run.renewed_at, sent)
            return True
        log.warning("%s: not started, %s", run.claim.fire_id, reason)
        return False

    # -- finishing ---------------------------------------------------------
    def _record_results(self) -> None:
        """One thread writes every result: successes go to Redis in one round trip per
        shard for all runs that finished meanwhile, and run lines are logged in order."""
        last = False
        while not last:
            batch: list[tuple[Running, Outcome]] = []
            notes: list[Note] = []
            item = self._results.get()
            while True:
                if item is None:  # the worker is stopping and this is all
                    last = True
                    break
                if isinstance(item, Note):
                    notes.append(item)
                else:
                    batch.append(item)
                if len(batch) + len(notes) >= RESULT_BATCH or self._results.empty():
                    break
                item = self._results.get_nowait()
            with batched_lines():
                self._record_batch(batch)
                self._write_notes(notes)

    def _write_notes(self, notes: list[Note]) -> None:
        for note in notes:
            try:
                self._persist(lambda n=note: self.scripts.record(  # type: ignore[misc]
                    n.keys, n.job, n.record, self.history_cap))
            except REDIS_ERRORS as exc:
                self._noted(exc)
                log.error("%s: history line not recorded: %s", note.record.get("fire"), exc)

    def _record_batch(self, batch: list[tuple[Running, Outcome]]) -> None:
        acks: dict[Keys, list[tuple[Running, Outcome, dict[str, Any]]]] = {}
        for run, outcome in batch:
            try:
                self._finish(run, outcome, acks)
            except REDIS_ERRORS as exc:
                self._noted(exc)
                log.error("%s: result not recorded, the fire will run again: %s",
                          run.claim.fire_id, exc)
            except Exception:  # the worker must survive a result it cannot record
                log.exception("result of %s not recorded", run.claim.fire_id)
        for keys, items in acks.items():
            self._ack(keys, items)
        for run, _ in batch:
            self._free(run)

    def _finish(self, run: Running, outcome: Outcome,
                acks: dict[Keys, list[tuple[Running, Outcome, dict[str, Any]]]]) -> None:
        """Record a failure or a release now; add a success to ``acks``."""
        claim, job = run.claim, run.job
        lag = self._lag(run, outcome)
        if outcome.status == "cancelled" and run.cancel_reason in ("shutdown", "lease lost"):
            if run.cancel_reason == "shutdown":
                self._persist(lambda: self.scripts.release(
                    run.keys, [(claim.fire_id, claim.token)]))
            log_outcome(log, self.worker_id, claim, outcome, lag, note=run.cancel_reason)
            return
        status: str = outcome.status
        if status == "cancelled":
            status = run.cancel_reason or "cancelled"
        record = history_record(claim, outcome, self.worker_id, self._offset_ms, status=status)
        if outcome.status == "ok" or status == "replaced":
            acks.setdefault(run.keys, []).append((run, outcome, record))
            return
        retry_at = self._server_now() + int(job.retry_delay(claim.token) * 1000)
        try:
            verdict, _ = self._persist(lambda: self.scripts.fail(
                run.keys, claim.fire_id, claim.token, claim.job, record, self.history_cap,
                job.max_attempts, retry_at,
            ))
        except LeaseLost as exc:
            log.warning("%s: result not recorded, lease taken over: %s", claim.fire_id, exc)
            return
        log_outcome(log, self.worker_id, claim, outcome, lag, note=verdict)
        if verdict == "retry":
            # The claim loop last looked while this fire was in flight and sleeps up to
            # MAX_SLEEP: let it see the retry's time now, or a short backoff waits that long.
            self._wake.set()
        if verdict == "dead":
            self.metrics.dead(claim.job)
        self.metrics.run_finished(claim, status, lag, job.kind)

    def _ack(self, keys: Keys, items: list[tuple[Running, Outcome, dict[str, Any]]]) -> None:
        acks = [(run.claim.fire_id, run.claim.token, run.claim.job, record)
                for run, _, record in items]
        try:
            recorded = self._persist(lambda: self.scripts.ack_many(keys, acks, self.history_cap))
        except REDIS_ERRORS as exc:
            self._noted(exc)
            log.error("%d result(s) not recorded, their fires will run again: %s",
                      len(items), exc)
            return
        for (run, outcome, record), ok in zip(items, recorded, strict=True):
            claim = run.claim
            if not ok:
                log.warning("%s: result not recorded, lease taken over (attempt %d)",
                            claim.fire_id, claim.token)
                continue
            lag = self._lag(run, outcome)
            log_outcome(log, self.worker_id, claim, outcome, lag)
            self.metrics.run_finished(claim, record["status"], lag, run.job.kind)

    def _lag(self, run: Running, outcome: Outcome) -> int:
        return outcome.started_ms + self._offset_ms - run.claim.due_ms

    def _persist(self, write: Callable[[], T]) -> T:
        """Run ``write`` until Redis takes it: a result is worth waiting for, since an
        unrecorded run is run again once its lease expires. Redis unreachable or refusing
        writes for now (OOM, READONLY, ...) is waited out; gives up on a hard stop or after
        RESULT_PATIENCE seconds (the fire then runs again: at least once)."""
        deadline = monotonic() + RESULT_PATIENCE
        pause = 0.1
        while True:
            try:
                return write()
            except REDIS_ERRORS as exc:
                if not is_outage(exc) or self._hard_stop.is_set() or monotonic() > deadline:
                    raise
                self._noted(exc)
                log.warning("cannot record a result yet, retrying: %s", exc)
                self._hard_stop.wait(pause)
                # Soon after Redis is back, well within a lease: until it is recorded,
                # the result holds the fire only as long as heartbeats renew its lease.
                pause = min(pause * 2, OUTAGE_RETRY, self.lease_ms / 4000)

    def _hand_back(self, keys: Keys, claim: Claim) -> None:
        log.warning("%s: job %s is not in this worker's file (any more); handing it back",
                    claim.fire_id, claim.job)
        try:
            self.scripts.release(keys, [(claim.fire_id, claim.token)])
        except REDIS_ERRORS as exc:
            self._noted(exc)
            log.warning("%s: cannot hand it back, it runs after its lease: %s",
                        claim.fire_id, exc)

    def _reclaimed(self, keys: Keys, claim: Claim) -> None:
        """A fire whose holder's lease lapsed: say so, and keep that attempt in history."""
        before = claim.before or {}
        log.warning("%s: reclaimed from %s (its lease lapsed); attempt %d", claim.fire_id,
                    before.get("worker", "?"), claim.token,
                    extra={"job": claim.job, "fire": claim.fire_id, "attempt": claim.token,
                           "worker": self.worker_id})
        self.metrics.reclaimed(claim.job)
        self._results.put(Note(keys, claim.job, lost_record(claim, before)))

    def _record_drop(self, fid: str, reason: str) -> None:
        record = drop_record(fid, reason, self.worker_id)
        job = record["job"]
        keys = keys_for(job, self.config.redis.shards, self.config.redis.prefix)
        # Written by the results thread, which rides out an outage; the claim loop must not.
        self._results.put(Note(keys, job, record))
        log_dropped(log, self.worker_id, fid, record["status"], record["reason"])
        self.metrics.dropped(job, reason)

    def _server_now(self) -> int:
        return self.clock.now_ms() + self._offset_ms

    # -- leases ------------------------------------------------------------
    def _heartbeat_loop(self) -> None:
        period = max(self.lease_ms / 3000, 0.05)
        while not self._hard_stop.wait(period):
            if self._stopping.is_set() and not self._running:
                return
            try:
                self.heartbeat_once()
            except REDIS_ERRORS as exc:
                # Runs go on; a lease that cannot be renewed in time is fenced off.
                self._noted(exc)
                log.warning("lease renewal failed: %s", exc)

    def heartbeat_once(self) -> None:
        with self._lock:
            runs = list(self._running.values())
        for keys, group in _by_shard(runs).items():
            sent = monotonic()
            results = self.scripts.heartbeat(
                keys, self.lease_ms, [(r.claim.fire_id, r.claim.token) for r in group]
            )
            for run, result in zip(group, results, strict=True):
                if result:  # renewed, also when the run is to stop (2)
                    run.renewed_at = max(run.renewed_at, sent)
                    if run.leash is not None:
                        run.leash.renewed()
                if result == 1 or run.cancel.is_set():
                    continue
                run.cancel_reason = "replaced" if result == 2 else "lease lost"
                log.warning("%s: stopping run: %s", run.claim.fire_id, run.cancel_reason)
                run.cancel.set()

    def _kill_at(self, run: Running) -> float:
        """When the watchdog kills the run's command: one margin before its lease may lapse."""
        return run.renewed_at + self.lease_ms / 1000 - self._margin

    def _fence_loop(self) -> None:
        """Stop every run one margin before the watchdog would kill it: its lease could
        not be renewed in time, and another worker may take the fire over once it lapses.
        This thread never waits on Redis, so a renewal stuck on a lost connection cannot
        hold it up; the cancel ends a command with SIGTERM (a call is only told), and its
        result is not recorded (a later one would be rejected by its fencing token)."""
        while not self._hard_stop.is_set():
            wait = self.lease_ms / 3000
            now = monotonic()
            with self._lock:
                runs = list(self._running.values())
            for run in runs:
                left = self._kill_at(run) - self._margin - now
                if left > 0:
                    wait = min(wait, left)
                elif not (run.ended or run.cancel.is_set()):
                    log.warning("%s: stopping run: lease not renewed for %.1fs, it may lapse",
                                run.claim.fire_id, now - run.renewed_at)
                    run.cancel_reason = "lease lost"
                    run.cancel.set()
            self._hard_stop.wait(wait)

    # -- wake-ups and presence ---------------------------------------------
    def _listen(self) -> None:
        channels = sorted({k.wakeup for k in self.shards})
        while not self._stopping.is_set():
            try:
                pubsub = self.client.pubsub(ignore_subscribe_messages=True)
                pubsub.subscribe(*channels)
                while not self._stopping.is_set():
                    if pubsub.get_message(timeout=1.0):
                        self._wake.set()
            except REDIS_ERRORS as exc:
                self._noted(exc)
                log.warning("wake-up channel lost: %s", exc)
                self._stopping.wait(1.0)

    def _presence(self) -> None:
        keys = self.shards[0]
        info = {"busy": self._busy(), "slots": self.concurrency, "pid": os.getpid(),
                "held": self.held, "jobs": len(self.config.jobs),
                "last_error": self.errors.as_info()}
        try:
            pipe = self.client.pipeline(transaction=False)
            pipe.zadd(keys.workers, {self.worker_id: self._server_now()})
            pipe.hset(keys.worker_info, self.worker_id, _json(info))
            pipe.execute()
            # Redis lost what this worker holds (a restart without persistence, a flush):
            # until it is written again, the claim script gives this worker nothing.
            if not all(self.client.exists(k.held(self.held)) for k in self._held_shards):
                log.warning("the definitions this worker holds are gone from Redis; "
                            "writing them again")
                self._held_at = -HELD_RENEW_EVERY
        except REDIS_ERRORS as exc:
            self._noted(exc)
            log.warning("cannot record presence: %s", exc)

    # -- shutdown ----------------------------------------------------------
    def _release_stuck(self, runs: list[Running]) -> None:
        for run in runs:
            log.warning("%s: call still running at stop; its fire is given back", run.claim.fire_id)
        for keys, group in _by_shard(runs).items():
            try:
                self.scripts.release(keys, [(r.claim.fire_id, r.claim.token) for r in group])
            except REDIS_ERRORS as exc:
                log.error("cannot give back %d fire(s), they run again after their lease: %s",
                          len(group), exc)

    def _shutdown(self) -> None:
        deadline = monotonic() + self.grace
        if self._running:
            log.info("stopping: waiting up to %.0fs for %d running job(s)", self.grace,
                     len(self._running))
        while self._running and monotonic() < deadline and not self._hard_stop.is_set():
            self._hard_stop.wait(0.05)
        with self._lock:
            left = [run for run in self._running.values() if not run.ended]
        for run in left:
            run.cancel_reason = "shutdown"
            run.cancel.set()
        # Commands are killed and timed calls given up on, and each releases its fire;
        # a call without a timeout returns when it returns (soon, if it polls
        # stopping()). Then the fires of calls still running are given back here.
        started = monotonic()
        while pending := [run for run in left if not run.ended]:
            waited = monotonic() - started
            if waited > STOP_WAIT or (waited > CALL_STOP_WAIT and not any(
                    run.job.call is None or run.job.timeout is not None for run in pending)):
                break
            time.sleep(0.05)
        self._pool.close()
        self._release_stuck([run for run in left if not run.ended])
        self._results.put(None)
        if self._results_thread.is_alive():
            self._results_thread.join()
        self._hard_stop.set()
        self._watchdog.close()  # kills what a run left that could not be stopped
        try:
            keys = self.shards[0]
            pipe = self.client.pipeline(transaction=False)
            pipe.zrem(keys.workers, self.worker_id)
            pipe.hdel(keys.worker_info, self.worker_id)
            pipe.execute()
        except REDIS_ERRORS:
            pass
        log.info("worker %s stopped after %d run(s)", self.worker_id, self.runs_finished)


def _by_shard(runs: list[Running]) -> dict[Keys, list[Running]]:
    by_keys: dict[Keys, list[Running]] = {}
    for run in runs:
        by_keys.setdefault(run.keys, []).append(run)
    return by_keys


def _json(value: Any) -> str:
    import json

    return json.dumps(value, separators=(",", ":"))
