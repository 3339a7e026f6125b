"""The worker: claim due fires, run them, keep their leases, ack or fail.

One thread claims and sleeps, a pool runs the jobs (and one event loop the async
``call`` jobs, :mod:`cronsvc.run.loop`), one thread renews leases,
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

This module claims and runs; :mod:`cronsvc.worker.leases` keeps the leases,
:mod:`cronsvc.worker.results` records what runs and claims leave behind.
"""

from __future__ import annotations

import hashlib
import logging
import os
import threading
import time
from collections.abc import Callable
from typing import Any

import redis

from cronsvc.clock import SYSTEM, Clock, monotonic
from cronsvc.config.jobfile import JobFile
from cronsvc.config.models import Config, Job
from cronsvc.fires import schedule_of
from cronsvc.history import Cancel
from cronsvc.keys import EACH_HOST, Keys, all_shards, host_pool
from cronsvc.kinds import (
    crashed,
    execute,
    launch,
    outcome_of,
    prepare,
    runs_async,
    starts_processes,
)
from cronsvc.kinds.call import Ready, ready, untimed_result
from cronsvc.malformed import named
from cronsvc.metrics.counters import NO_METRICS, Metrics
from cronsvc.metrics.traces import traces
from cronsvc.notify.pings import Pinger
from cronsvc.presence import MAX_SLEEP_S, PRESENCE_EVERY, process_id, this_host
from cronsvc.run.calls import call_with
from cronsvc.run.context import Deferred, FireContext
from cronsvc.run.flag import Flag
from cronsvc.run.hooks import Hooks
from cronsvc.run.loop import SHARED
from cronsvc.run.outcome import Outcome
from cronsvc.run.watchdog import Leash, Watchdog, margin
from cronsvc.store.faults import REDIS_ERRORS, ErrorLog, describe
from cronsvc.store.replies import compact
from cronsvc.store.scripts import Claim, Scripts
from cronsvc.worker.deliveries import Deliveries
from cronsvc.worker.leases import UNCHECKED, Leases
from cronsvc.worker.live import LiveKept, LiveOutput
from cronsvc.worker.results import Results
from cronsvc.worker.running import Running, by_shard
from cronsvc.worker.server_time import ServerTime
from cronsvc.worker.slots import Slots

log = logging.getLogger("cronsvc.worker")
_new = object.__new__
_tuple = tuple.__new__

MAX_SLEEP = MAX_SLEEP_S  # the longest sleep of the claim loop (cronsvc.presence)
# An each-host fire is copied to the hosts that look within this long after its time; a
# host away longer misses it (no host is waited for).
EACH_HOST_WINDOW_MS = 60_000
# While Redis cannot be reached, it is tried again at most this far apart.
OUTAGE_RETRY = 2.0
# Due fires examined per claim, so `catch_up: latest` sees a job's newer fires.
SCAN_LIMIT = 200
# How long a stopping worker waits for cancelled runs to end before it gives their fires
# back: commands get KILL_GRACE after SIGTERM; calls without a timeout cannot be stopped.
STOP_WAIT = 10.0
CALL_STOP_WAIT = 1.0
# The definitions a worker holds expire unless it renews them this often (a worker gone
# without a word must not keep fires waiting for it).
HELD_TTL = 600
HELD_RENEW_EVERY = 60.0
# A fire prefetched beyond the slots that no slot took within this long after its due
# time goes back to the queue, for a worker with a free slot.
PREFETCH_WAIT = 0.05


def earliest(at: float | None, other: float) -> float:
    """The earlier of two monotonic times, ``at`` None for none yet."""
    return other if at is None or other < at else at


def sleep_until(at: float | None) -> float:
    """Seconds from now to the monotonic time ``at``, at most MAX_SLEEP (None: MAX_SLEEP)."""
    if at is None:
        return MAX_SLEEP
    return min(MAX_SLEEP, max(at - monotonic(), 0.0))


def any_async(config: Config) -> bool:
    """Whether some job of the file runs on the event loop (this imports call targets)."""
    return any(runs_async(job) for job in config.jobs.values())


def held_digest(config: Config) -> str:
    """Names the set of definitions a worker holds: workers with the same jobs share it."""
    text = "\n".join(f"{name}={job.definition}" for name, job in sorted(config.jobs.items()))
    return hashlib.sha256(text.encode()).hexdigest()[:12]


class Worker:
    """Claims and runs fires of the jobs in its own config, and only those."""

    def __init__(
        self,
        config: Config | JobFile,
        client: redis.Redis,
        *,
        concurrency: int | None = None,
        async_concurrency: int | None = None,
        worker_id: str | None = None,
        lease: float | None = None,
        grace: float | None = None,
        clock: Clock = SYSTEM,
        metrics: Metrics | None = None,
        pools: tuple[str, ...] | None = None,
        host: str | None = None,
        watchdog: Watchdog | None = None,
        report: Callable[[dict[str, Any]], None] | None = None,
        claim_ahead: float | None = None,
        prefetch_multiplier: int | None = None,
    ) -> None:
        # Reloaded on change and SIGHUP (a Config built in code never changes).
        self.job_file = config if isinstance(config, JobFile) else JobFile.fixed(config)
        config = self.job_file.config
        self.config = config  # the file's, with the redis and worker sections it started with
        self.held = held_digest(config)
        self.client = client
        # Its claim loop and results thread each keep a connection for their calls.
        self.scripts = Scripts(client, hold=True)
        self.concurrency = concurrency or config.worker.concurrency
        self.async_concurrency = async_concurrency or config.worker.async_concurrency
        self.worker_id = worker_id or process_id()
        self.lease_ms = int((lease or config.worker.lease) * 1000)
        # Fires due within this long are claimed ahead and started at their due time.
        self.ahead_ms = int(round((config.worker.claim_ahead if claim_ahead is None
                                   else claim_ahead) * 1000))
        # Fires held at most, counting those prefetched beyond the slots (see _prefetch).
        self.prefetch_max = self.concurrency * (
            config.worker.prefetch_multiplier if prefetch_multiplier is None
            else prefetch_multiplier)
        # A queue whose claim ahead filled the free slots, more due within ahead_ms: the
        # monotonic time to come back for those (_prefetch).
        self._prefetch_at: dict[Keys, float] = {}
        self._prefetched: list[Running] = []  # prefetched runs, until a slot takes them
        self.grace = config.worker.grace if grace is None else grace
        self.history_cap = config.worker.history
        self.clock = clock
        self.shards = all_shards(config.redis.shards, config.redis.prefix)
        self.pools = pools or config.worker.pools
        self.host = host or config.worker.host or this_host()
        self._queues = self._queues_of(config)
        self._any_async = any_async(config)
        # name -> (job, runs_async, some hook wants its runs, starts_processes, what an
        # untimed sync call calls: kinds.call.ready)
        self._job_traits: dict[str, tuple[Job, bool, bool, bool, Ready | None]] = {}
        self._rotation = 0
        self._running: set[Running] = set()
        self._outcomes: dict[int, tuple[Keys, Deliveries]] = {}  # see _deliveries
        self._lock = threading.Lock()
        # Runs started and not ended, in slots and on the loop: counted as they start and
        # end (under the lock), not found by a look at every run held (ended ones too,
        # until their result is in).
        self._busy_n = 0
        self._awaiting_n = 0
        self._wake = threading.Event()
        # The claim loop found no free slot: the next run to end wakes it (else a run's end
        # leaves it asleep until its next fire, not asking Redis for nothing meanwhile).
        self._starved = False
        self.stopping = threading.Event()  # stop claiming
        self.hard_stopped = threading.Event()  # stop runs now, stop waiting on Redis
        self._pool = Slots(self.concurrency, "cronsvc-run")
        self.results = Results(self)
        self._hand_over = self.results.hand_over
        self._made = self._context_once  # what a Deferred context calls (_run_ready)
        # Around every run: the dead-man pings of the jobs that ask for them, and traces
        # when the OTEL_* variables ask for them.
        self.hooks = Hooks([Pinger(), *traces(self.worker_id, self.server_now)])
        self.offset_ms = 0  # server clock minus local clock, from the last claim
        self._server_time = ServerTime()  # when the claim loop wakes, to a fraction of a ms
        # The last claim took all it asked for: more fires may be due now (results wait).
        self.claiming = False
        self._held_at = -HELD_RENEW_EVERY  # monotonic time the held definitions were written
        self._reload_asked = threading.Event()
        self.errors = ErrorLog(clock)
        self.runs_finished = 0
        self.metrics = metrics or NO_METRICS
        self.metrics.worker_slots(self._slots_busy, self.concurrency)
        self.leases = Leases(self, margin(self.lease_ms / 1000))
        self.live = LiveOutput(client, lambda: self.results.retention_ms)
        # One process of several (cronsvc.worker.prefork): a watchdog shared with the
        # others, and presence told to their supervisor, which writes one for them all.
        self._watchdog = watchdog or Watchdog()
        self.report = report

    # -- public ------------------------------------------------------------
    def stop(self) -> None:
        """First call: stop claiming, let runs finish within the grace period.
        Second call: stop the runs now and give their fires back."""
        if self.stopping.is_set():
            self.hard_stopped.set()
        self.stopping.set()
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
        config = self.job_file.reload(force=True)  # asked for: a change, or SIGHUP
        if config is None:
            return False
        if (config.redis, config.worker) != (self.config.redis, self.config.worker):
            log.warning("%s: redis and worker settings take effect at the next start",
                        self.job_file)
            config = config.model_copy(update={"redis": self.config.redis,
                                               "worker": self.config.worker})
        self.config, self.held = config, held_digest(config)
        self._queues = self._queues_of(config)
        self._any_async = any_async(config)
        self._held_at = -HELD_RENEW_EVERY  # write the new definitions at once
        prepare(list(config.jobs.values()))
        log.info("reloaded %s: %d jobs", self.job_file, len(config.jobs))
        return True

    def run_forever(self) -> None:
        threads = [
            threading.Thread(target=self._listen, name="cronsvc-wakeup", daemon=True),
            threading.Thread(target=self.leases.renew_loop, name="cronsvc-lease", daemon=True),
            threading.Thread(target=self.leases.fence_loop, name="cronsvc-fence", daemon=True),
        ]
        for t in threads:
            t.start()
        self.results.start()
        prepare(list(self.config.jobs.values()))
        if any(job.command for job in self.config.jobs.values()):
            self._watchdog.start()
        self.live.start()
        self.job_file.watch(self.request_reload)
        log.info("worker %s started: %d slots%s, lease %.0fs, %d jobs, pools %s",
                 self.worker_id, self.concurrency,
                 f" and {self.async_concurrency} async" if self._any_async else "",
                 self.lease_ms / 1000, len(self.config.jobs),
                 ", ".join(self.served()))
        try:
            self._loop()
        finally:
            self.job_file.stop()
            self._shutdown()

    # -- claiming ----------------------------------------------------------
    def _loop(self) -> None:
        last_presence = -PRESENCE_EVERY
        outage = 0.0  # current back-off while Redis cannot be reached
        while not self.stopping.is_set():
            if self._reload_asked.is_set():
                self._reload_asked.clear()
                if self.reload():
                    self.metrics.worker_slots(self._slots_busy, self.concurrency)
            if monotonic() - last_presence >= PRESENCE_EVERY:
                self._presence()
                last_presence = monotonic()
            self._wake.clear()
            if monotonic() - self._held_at >= HELD_RENEW_EVERY:
                self.write_held()
            try:
                self._server_time.read(self.client)
                wait = self.claim_once()
                outage = 0.0
            except REDIS_ERRORS as exc:
                # Redis restarting, failing over or refusing writes (OOM, READONLY): keep
                # the running jobs, claim again later.
                self.noted(exc)
                if not outage:
                    log.warning("cannot claim, retrying: %s", describe(exc))
                outage = min(max(outage * 2, 0.25), OUTAGE_RETRY)
                wait = outage
            if wait > 0 and not self.stopping.is_set():
                self._wake.wait(wait)

    def write_held(self) -> None:
        """Write the definitions this worker holds on every shard, for the claim script: a
        runtime schedule's fires of any job live on the shard of the schedule's id."""
        held: dict[Any, Any] = {
            name: job.definition for name, job in self.config.jobs.items()}
        failed = 0
        for keys in self.shards if held else []:
            try:
                pipe = self.client.pipeline(transaction=False)
                pipe.hset(keys.held(self.held), mapping=held)
                pipe.expire(keys.held(self.held), HELD_TTL)
                pipe.execute()
            except REDIS_ERRORS as exc:  # one shard down must not stop the others
                self.noted(exc)
                failed += 1
        # All written: renew in a while; else try the missing shards again at the next turn.
        if not failed:
            self._held_at = monotonic()

    def noted(self, exc: BaseException) -> None:
        """Remember a Redis error for status and metrics."""
        self.metrics.redis_error(self.errors.note(exc))

    def claim_once(self) -> float:
        """Claim up to the free slots from every shard; return seconds to sleep."""
        # Monotonic time of a prefetched run's give-back, then of the earliest next fire.
        give_back_at = self._give_back_late() if self._prefetched else None
        wake_at = give_back_at
        failed: list[Exception] = []
        queues = self._queues
        n = len(queues)
        start = self._rotation % n
        self._rotation = (self._rotation + 1) % n  # no shard or pool always goes first
        for i in range(n):
            self._starved = True  # before the slots are counted: a run ending now wakes it
            free = self._free()
            if free <= 0:  # woken by a finishing run (_wake), not by a fire's due time
                return self._prefetch(give_back_at)
            self._starved = False
            keys = queues[(start + i) % n]
            t0 = monotonic()
            try:
                if keys.pool == host_pool(self.host):
                    # This host's copies of the each-host fires due now, then claimed as any.
                    _, later = self.scripts.each_host(keys, self.host, EACH_HOST_WINDOW_MS)
                    if later >= 0:
                        at = monotonic() + max(later - self.server_now(), 0) / 1000
                        wake_at = earliest(wake_at, at)
                res = self.scripts.claim(
                    keys, self.worker_id, batch=free, lease_ms=self.lease_ms,
                    scan_limit=max(SCAN_LIMIT, free), held=keys.held(self.held),
                    ahead_ms=self.ahead_ms,
                )
            except REDIS_ERRORS as exc:
                # One shard down (a cluster master failing over) must not stop the others.
                self.noted(exc)
                failed.append(exc)
                if len(failed) == n:
                    raise
                continue
            t1 = monotonic()
            # The server's clock is the only clock: remember how far ours is off.
            self.offset_ms = int(res.now_ms + (t1 - t0) * 500 - self.clock.now_ms())
            # Start first: recording drops talks to Redis, and a claim must not age meanwhile.
            claimed = res.claimed
            # Fires claimed ahead come last (in due order): each starts at its due time.
            if claimed and claimed[-1].due_ms > res.now_ms:
                self._start(keys, claimed, t0, self._not_before(claimed, res.now_ms, t0, t1))
                # Its free slots filled with fires claimed ahead and more due within
                # ahead_ms: back for them halfway to their due time, once the free slots of
                # the fleet's other workers, woken with this one, took theirs.
                if (len(claimed) >= free and self.prefetch_max > self.concurrency
                        and res.now_ms < res.next_ms <= res.now_ms + self.ahead_ms):
                    self._prefetch_at[keys] = self._server_time.wake_at(
                        max(res.next_ms - self.ahead_ms // 2, res.now_ms + self.ahead_ms // 4),
                        res.now_ms, t0, t1)
            else:
                self._start(keys, claimed, t0)
            self.claiming = len(res.claimed) >= free
            for claim in res.claimed:
                if claim.before is not None:
                    self.results.reclaimed(keys, claim)
            if res.dropped:
                self.results.dropped(res.dropped)
            for member, key in res.aside:  # the script kept it: said once, here
                log.warning("set aside %s (`cronsvc malformed` lists it)",
                            named(key, member, "not a fire id"))
            if res.next_ms >= 0:
                # now_ms was read on the server between t0 and t1 (timed from t1, every
                # sleep ended half a round trip late), in whole ms: see ServerTime. Woken
                # ahead_ms before a fire due later than that; at its due time for one due
                # sooner, which this claim saw and left (it waits for its due time).
                next_ms = res.next_ms
                if next_ms > res.now_ms + self.ahead_ms:
                    next_ms -= self.ahead_ms
                at = self._server_time.wake_at(next_ms, res.now_ms, t0, t1)
                wake_at = earliest(wake_at, at)
        if failed:
            log.warning("%d of %d shard(s) cannot be claimed from: %s", len(failed), n, failed[0])
        if self._prefetch_at:  # (one whose time passed while slots were free: claimed)
            now = monotonic()
            self._prefetch_at = {k: at for k, at in self._prefetch_at.items() if at > now}
            for at in self._prefetch_at.values():
                wake_at = earliest(wake_at, at)
        return sleep_until(wake_at)

    def _prefetch(self, wake_at: float | None) -> float:
        """With no free slot: take the fires due within ``ahead_ms`` that the fleet's free
        slots left, up to ``prefetch_max`` held in all, from each queue whose time for it
        came (``_prefetch_at``); they wait in this worker for a slot, and one no slot took
        within PREFETCH_WAIT of its due time goes back (:meth:`_give_back_late`). Seconds
        to the next such time or ``wake_at`` (a give-back's), at most MAX_SLEEP (a
        finishing run wakes the loop)."""
        now = monotonic()
        for keys, at in list(self._prefetch_at.items()):
            if at > now:
                wake_at = earliest(wake_at, at)
                continue
            del self._prefetch_at[keys]
            room = self.prefetch_max - self._busy_n
            if room <= 0 or self.stopping.is_set():
                continue
            t0 = monotonic()
            try:
                res = self.scripts.claim(
                    keys, self.worker_id, batch=0, lease_ms=self.lease_ms,
                    scan_limit=SCAN_LIMIT, held=keys.held(self.held), ahead_ms=self.ahead_ms,
                    prefetch=room)
            except REDIS_ERRORS as exc:  # the next claim says what Redis is up to
                self.noted(exc)
                continue
            t1 = monotonic()
            if res.claimed:
                self._start(keys, res.claimed, t0,
                            self._not_before(res.claimed, res.now_ms, t0, t1), prefetched=True)
                waiting = [run.start_at for run in self._prefetched if not run.taken]
                if waiting:
                    at = min(waiting) + PREFETCH_WAIT
                    wake_at = earliest(wake_at, at)
        return sleep_until(wake_at)

    def _give_back_late(self) -> float | None:
        """Give the prefetched runs no slot took within PREFETCH_WAIT of their due time
        back to the queue, their attempt not counted, and wake the workers to claim them
        (a slot that takes one later drops it); the monotonic time the next one waiting is
        late, or None."""
        late: list[Running] = []
        waiting: list[Running] = []
        next_at: float | None = None
        now = monotonic()
        with self._lock:
            for run in self._prefetched:
                if run.taken or run.cancel.is_set():  # (a cancelled one ends in its slot)
                    continue
                at = run.start_at + PREFETCH_WAIT
                if at <= now:
                    run.taken = True
                    late.append(run)
                else:
                    waiting.append(run)
                    next_at = earliest(next_at, at)
            self._prefetched = waiting
        for keys, group in by_shard(late).items():
            try:
                self.scripts.release(keys, [(r.claim.fire_id, r.claim.token) for r in group])
                self.client.publish(keys.wakeup, "released")
            except REDIS_ERRORS as exc:  # not given back: they run here, late
                self.noted(exc)
                log.warning("cannot give back %d prefetched fire(s), they run here: %s",
                            len(group), describe(exc))
                with self._lock:
                    for run in group:
                        run.taken = False
                continue
            for run in group:
                log.info("%s: no free slot within %d ms of its due time; given back",
                         run.claim.fire_id, PREFETCH_WAIT * 1000)
                self.metrics.given_back(run.claim.job)
                self._ended(run, None)
        return next_at

    def _not_before(self, claimed: list[Claim], now_ms: int, sent: float, received: float
                    ) -> dict[int, float]:
        """Due time -> the monotonic time its fires start at, for the fires of a claim due
        after its reply's ``now_ms`` (taken ahead): when the server's clock has surely
        reached it (:meth:`ServerTime.surely_at`). One due later than ``ahead_ms`` (queued
        by hand at a time before its id's) is not waited for."""
        starts: dict[int, float] = {}
        last = now_ms + self.ahead_ms
        for claim in reversed(claimed):
            due = claim.due_ms
            if due <= now_ms:
                break
            if due <= last and due not in starts:
                starts[due] = self._server_time.surely_at(due, now_ms, sent, received)
        return starts

    def _queues_of(self, config: Config) -> list[Keys]:
        """What the claim loop takes from, in turn: the queue of each pool served on each
        shard (so no pool or shard starves), and this host's own, while the file has jobs
        that run on each host."""
        pools = list(self.pools)
        if any(job.pool == EACH_HOST for job in config.jobs.values()):
            pools.append(host_pool(self.host))
        return [k.with_pool(pool) for k in self.shards for pool in pools]

    def served(self) -> list[str]:
        """The pools this worker runs fires of, as it tells the fleet (each-host's through
        its host's own, while it claims from that)."""
        mine = host_pool(self.host)
        each = any(k.pool == mine for k in self._queues)
        return [*self.pools, *([EACH_HOST, mine] if each else [])]

    def _start(self, keys: Keys, claims: list[Claim], claimed_at: float,
               not_before: dict[int, float] | None = None, prefetched: bool = False) -> None:
        """Start the runs of one claim's fires: held under one lock, then handed to the
        slots or the loop; a fire of a job this file lacks is handed back after.
        ``not_before``: due time -> monotonic time, for fires claimed ahead: their runs
        are handed over now and start then (:meth:`_run`, :meth:`_launch_at`).
        ``prefetched``: claimed beyond the free slots (:meth:`_prefetch`)."""
        runs: list[Running] = []
        unknown = []
        add = runs.append
        # Sorted as they are made (no other thread sees them before they are held, below).
        plain: list[tuple[Running, Ready | None]] = []
        on_loop: list[Running] = []
        procs: list[tuple[Running]] = []
        # Plain runs claimed ahead, by start time: each group one task until then.
        ahead: dict[float, list[tuple[Running, Ready | None]]] = {}
        jobs, traits = self.config.jobs, self._job_traits
        for claim in claims:
            name = claim.job
            job = jobs.get(name)
            if job is None:
                unknown.append(claim)
                continue
            hit = traits.get(name)  # the claim's name is the job's: not read of the job
            if hit is None or hit[0] is not job:
                hit = self._traits_of(job)
            # Running(claim, job, keys, claimed_at, claimed_at, on_loop, hooked, procs,
            # True), its fields set one by one in its __init__'s order (the instance's
            # values stay inline, as __init__ leaves them), without the call: 0.33 against
            # 0.57 µs a fire. The lease began after claimed_at, the moment the claim was
            # sent. Counted below, before any other thread sees it.
            run = _new(Running)
            run.claim = claim
            run.job = job
            run.keys = keys
            run.cancel = Flag()
            run.claimed_at = claimed_at
            run.renewed_at = claimed_at
            run.on_loop = loop = hit[1] and claim.unreadable is None
            run.hooked = hit[2]
            run.procs = hit[3]
            run.counted = True
            if prefetched:
                run.prefetched = True
                if not loop:  # (one on the loop starts at its time, holding no slot)
                    self._prefetched.append(run)
            add(run)
            if not_before is not None and claim.due_ms in not_before:
                run.start_at = not_before[claim.due_ms]
                if not (loop or hit[3]):  # started together at their time (_run_at)
                    ahead.setdefault(run.start_at, []).append((run, hit[4]))
                    continue
            if loop:
                on_loop.append(run)
            elif hit[3]:
                procs.append((run,))
            else:  # with what it calls, if it runs as _run_ready does
                plain.append((run, hit[4]))
        with self._lock:
            self._running.update(runs)
            self._awaiting_n += len(on_loop)
            self._busy_n += len(runs) - len(on_loop)
        # Handed to the slots in one go: one lock and at most one thread called for them
        # (which calls the next); the async runs put on the loop; then the runs that start
        # processes, a thread each, at once (last: their starts hold the GIL, and the
        # launches before would wait for them).
        self._pool.submit_many(self._run, plain)
        if ahead:
            self._pool.submit_many(self._run_at, [(group,) for group in ahead.values()])
        for run in on_loop:
            if run.start_at:
                SHARED.call(self._launch_at, run)
            else:
                self._launch(run)
        self._pool.submit_each(self._run, procs)
        for claim in unknown:
            # Redis names the job; only this worker's own config says what it runs. The
            # claim only gives it fires of definitions it holds, so this is a reload in
            # between: give the fire back at once, attempt not counted, for a worker that
            # has it.
            self._hand_back(keys, claim)

    def _traits_of(self, job: Job) -> tuple[Job, bool, bool, bool, Ready | None]:
        """Whether runs of ``job`` go on the loop (:func:`runs_async`, which resolves the
        target of a call job), whether some hook wants them and whether they start
        processes (:func:`starts_processes`); what they call if they run as
        :meth:`_run_ready` runs them (untimed sync calls no hook wants): asked once per job
        of the config in force."""
        on_loop, hooked, procs = runs_async(job), self.hooks.wanted(job), starts_processes(job)
        fast = None if on_loop or hooked or procs else ready(job)
        hit = self._job_traits[job.name] = (job, on_loop, hooked, procs, fast)
        return hit

    def _runs_async(self, job: Job) -> bool:
        hit = self._job_traits.get(job.name)
        if hit is None or hit[0] is not job:
            hit = self._traits_of(job)
        return hit[1]

    def _context(self, run: Running) -> FireContext:
        claim = run.claim
        fire_id = claim.fire_id
        # made(FireContext, ...) without its call, one per fire: its fields stored one by
        # one (no dict of keywords made); a field at its default (payload, schedule, trace:
        # None) is read from the class, where the dataclass keeps it. The same instance as
        # __init__ makes, a little dearer to read (few of its fields are read, unlike an
        # Outcome's, see outcome_of), cheaper to make: most fires have none of the three.
        ctx = _new(FireContext)
        fields = ctx.__dict__
        fields["job"] = claim.job
        fields["fire_id"] = fire_id
        fields["scheduled_ms"] = claim.due_ms
        fields["attempt"] = claim.token
        fields["worker"] = self.worker_id
        if claim.payload is not None:
            fields["payload"] = claim.payload
        if "!" in fire_id:  # most fires are no runtime schedule's (schedule_of)
            fields["schedule"] = schedule_of(fire_id)
        return ctx

    def _context_once(self, run: Running) -> FireContext:
        """The context of ``run``, made at the first ask (a Deferred's)."""
        ctx = run.context
        if ctx is None:
            ctx = run.context = self._context(run)
        return ctx

    def _launch_at(self, run: Running) -> None:
        """On the loop: launch a run claimed ahead at its start time (:meth:`_launch`)."""
        # (A µs past it: the loop runs a timer due within its clock's resolution.)
        SHARED.loop.call_at(run.start_at + 1e-6, self._launch, run)

    def _launch(self, run: Running) -> None:
        """Start an async run as a task on the loop: no slot thread waits for it. It ends
        through the same steps as a slot's run (:meth:`_ended`), from the task's end."""
        if not self.leases.still_held(run):
            self._ended(run, None)
            return
        ctx = self._context(run)
        if run.hooked:
            ctx = self.hooks.started(run.job, ctx)
        feed = self.live.open(run.keys, run.claim.fire_id, run.claim.token)

        def done(outcome: Outcome) -> None:
            self.live.close(feed)  # writes only for a run that streamed: its last output
            if run.hooked:
                self.hooks.ended(run.job, ctx, outcome)
            self._ended(run, outcome)

        # Set before the cancel is looked at: a stop in between cancels it either way.
        run.on_stop = launch(run.job, ctx, run.cancel, done, clock=self.clock, feed=feed)
        if run.cancel.is_set():
            run.on_stop()

    def _ended(self, run: Running, outcome: Outcome | None) -> None:
        with self._lock:
            if run.counted and not run.ended:
                if run.on_loop:
                    self._awaiting_n -= 1
                else:
                    self._busy_n -= 1
            run.ended = True
        # Its slot is free: the claim loop, waiting for one, looks again (set already, the
        # loop has yet to clear it, and it counts the free slots after it does).
        if self._starved and not self._wake.is_set():
            self._wake.set()
        if outcome is None:
            self.free(run)
        else:
            self._hand_over((run, outcome))  # results.finished(run, outcome)

    def _run_at(self, group: list[tuple[Running, Ready | None]]) -> None:
        """Runs claimed ahead that start at one time, in one slot thread until then: a
        task each, waiting in a thread each, would have the slots call a thread per run
        (:mod:`cronsvc.worker.slots`), all woken at once."""
        first = group[0]
        self._wait_start(first[0])
        self._pool.submit_many(self._run, group[1:])
        self._run(*first)

    def _wait_start(self, run: Running) -> None:
        """Until the start time of a run claimed ahead (a stop ends the wait)."""
        while not run.cancel.is_set() and (wait := run.start_at - monotonic()) > 0:
            run.cancel.wait(wait)

    def _run(self, run: Running, fast: Ready | None = None) -> None:
        """Run a fire in this (slot) thread and hand its end over; ``fast``: what it calls,
        for an untimed sync call no hook wants (:meth:`_traits_of`)."""
        claim = run.claim
        if run.start_at:  # claimed ahead: not before its due time
            self._wait_start(run)
        if run.prefetched:  # a slot takes it first, or it was given back (_give_back_late)
            with self._lock:
                if run.taken:
                    return
                run.taken = True
        if (fast is not None and claim.unreadable is None and not run.cancel.is_set()
                and monotonic() - run.claimed_at < self.lease_ms / UNCHECKED):
            self._run_ready(run, fast)
            return
        ctx = self._context(run)
        outcome = None
        # A kind whose runs start processes holds them on the run's leash.
        if run.procs:
            run.leash = Leash(self._watchdog, lambda: self.leases.kill_at(run))
        try:
            if not self.leases.still_held(run):
                pass
            elif claim.unreadable is not None:
                outcome = Outcome("failed", self.clock.now_ms(), 0, error=claim.unreadable)
            else:  # one frame: its run, between its live feed's open and close
                if run.hooked:
                    ctx = self.hooks.started(run.job, ctx)
                feed = self.live.open(run.keys, claim.fire_id, claim.token)
                try:
                    done = execute(run.job, ctx, run.cancel, self.clock, run.leash,
                                   self._deliveries(run.keys), feed)
                finally:
                    self.live.close(feed)
                if run.hooked:
                    self.hooks.ended(run.job, ctx, done)
                outcome = done  # none if a hook raised: then its fire is freed
        except Exception:  # the run loop must survive anything a job does
            log.exception("run of %s crashed the worker thread", claim.fire_id)
        self._ended(run, outcome)

    def _run_ready(self, run: Running, fast: Ready) -> None:
        """The steps of :meth:`_run` and :func:`execute` for a call found ready to run
        (:meth:`_run`): no hook wants it, no timeout, no cancel yet, its claim readable
        and fresh (:meth:`Leases.still_held` at once), its target resolved. What each step
        makes is the same; done in one frame, without the calls of the steps that have
        nothing to do for it (a hook, a trace, a Stop, a kind's lookup, a lease's check)."""
        claim, cancel = run.claim, run.cancel
        outcome = None
        try:
            # Made only if asked for (current(), ctx): most calls do neither.
            ctx = self._context(run) if fast[1] else _tuple(Deferred, (self._made, run))
            started_ms = self.clock.now_ms()
            t0 = monotonic()
            # its live feed opened at its first chunk, if any (most print nothing)
            out = LiveKept(fast[4], self.live, run, t0)
            try:
                result = untimed_result(call_with(
                    fast[0], fast[1], fast[2], fast[3], ctx, cancel, out), cancel)
            except Exception as exc:  # as execute: an outcome, whatever went wrong
                result = crashed(exc)
            duration_ms = int((monotonic() - t0) * 1000)
            out.closed()
            outcome = outcome_of(result, started_ms, duration_ms)
        except Exception:  # the run loop must survive anything a job does
            log.exception("run of %s crashed the worker thread", claim.fire_id)
        self._ended(run, outcome)

    def _deliveries(self, keys: Keys) -> Deliveries:
        """Where a dispatched fire of shard ``keys`` learns its outcome: one per shard
        and pool (it holds nothing of a fire), made at its first fire. Found by the
        identity of ``keys``, which it holds (a Keys hashes its fields in Python)."""
        found = self._outcomes.get(id(keys))
        if found is None or found[0] is not keys:
            if len(self._outcomes) > 256:  # Keys of configs reloaded since
                self._outcomes.clear()
            found = self._outcomes[id(keys)] = (
                keys, Deliveries(self.client, self.scripts, keys))
        return found[1]

    def _busy(self) -> int:
        """Slots taken: runs started and not ended, but those on the loop. A run frees its
        slot when it ends, so claiming goes on while its result is written (its lease is
        still renewed)."""
        return self._busy_n

    def _slots_busy(self) -> int:
        """Slots taken, as the fleet is told: prefetched runs waiting for one take none."""
        return min(self._busy_n, self.concurrency)

    def _awaiting(self) -> int:
        """Async runs started and not ended: tasks on the loop."""
        return self._awaiting_n

    def _free(self) -> int:
        """Fires to claim now: free slots, plus free places on the loop while the file has
        async jobs. The claim takes fires in due order whatever their kind, so a sync fire
        claimed beyond the slots waits in the worker for one; those waiting take places of
        the loop, which bounds them."""
        busy = self._busy()
        free = max(self.concurrency - busy, 0)
        if self._any_async:
            waiting = max(busy - self.concurrency, 0)
            free += max(self.async_concurrency - self._awaiting() - waiting, 0)
        return free

    def running(self) -> list[Running]:
        """The runs this worker holds a lease on (ended ones until their result is in)."""
        with self._lock:
            return list(self._running)

    def free(self, *runs: Running) -> None:
        """Forget runs whose result is recorded (or that never started)."""
        with self._lock:
            self._running.difference_update(runs)
        self.runs_finished += len(runs)
        told = self.hooks.recorded
        for run in runs:
            # forget(), inline: most runs have neither (read from the class)
            if run.leash is not None or run.on_stop is not None:
                run.forget()
            if run.hooked:
                told(run.claim.fire_id, run.claim.token)

    def wake(self) -> None:
        """Make the claim loop look at Redis now."""
        self._wake.set()

    def _hand_back(self, keys: Keys, claim: Claim) -> None:
        log.warning("%s: job %s is not in this worker's file (any more); handing it back",
                    claim.fire_id, claim.job)
        try:
            self.scripts.release(keys, [(claim.fire_id, claim.token)])
        except REDIS_ERRORS as exc:
            self.noted(exc)
            log.warning("%s: cannot hand it back, it runs after its lease: %s",
                        claim.fire_id, describe(exc))

    def server_now(self) -> int:
        """The Redis server's clock, as of this worker's last claim."""
        return self.clock.now_ms() + self.offset_ms

    # -- wake-ups and presence ---------------------------------------------
    def _listen(self) -> None:
        channels = sorted({k.wakeup for k in self.shards})
        while not self.stopping.is_set():
            try:
                pubsub = self.client.pubsub(ignore_subscribe_messages=True)
                pubsub.subscribe(*channels)
                while not self.stopping.is_set():
                    if pubsub.get_message(timeout=1.0):
                        self._wake.set()
            except REDIS_ERRORS as exc:
                self.noted(exc)
                log.warning("wake-up channel lost: %s", describe(exc))
                self.stopping.wait(1.0)

    def _presence(self) -> None:
        keys = self.shards[0]
        info = {"busy": self._slots_busy(), "slots": self.concurrency, "pid": os.getpid(),
                "awaiting": self._awaiting(),
                "held": self.held, "jobs": len(self.config.jobs), "pools": self.served(),
                "file": self.job_file.state(),
                "host": self.host,
                "last_error": self.errors.as_info()}
        try:
            if self.report is not None:
                self.report(info)
            else:
                pipe = self.client.pipeline(transaction=False)
                pipe.zadd(keys.workers, {self.worker_id: self.server_now()})
                pipe.hset(keys.worker_info, self.worker_id, compact(info))
                pipe.execute()
            # Redis lost what this worker holds (a restart without persistence, a flush):
            # until it is written again, the claim script gives this worker nothing. Only
            # once written and not yet due again: new definitions (a start, an edit) are not
            # lost, just about to be written.
            if self.config.jobs and monotonic() - self._held_at < HELD_RENEW_EVERY \
                    and not all(self.client.exists(k.held(self.held)) for k in self.shards):
                log.warning("the definitions this worker holds are gone from Redis; "
                            "writing them again")
                self._held_at = -HELD_RENEW_EVERY
        except REDIS_ERRORS as exc:
            self.noted(exc)
            log.warning("cannot record presence: %s", describe(exc))

    # -- shutdown ----------------------------------------------------------
    def _release_stuck(self, runs: list[Running]) -> None:
        for run in runs:
            log.warning("%s: call still running at stop; its fire is given back", run.claim.fire_id)
        for keys, group in by_shard(runs).items():
            try:
                self.scripts.release(keys, [(r.claim.fire_id, r.claim.token) for r in group])
            except REDIS_ERRORS as exc:
                log.error("cannot give back %d fire(s), they run again after their lease: %s",
                          len(group), describe(exc))

    def _shutdown(self) -> None:
        self.claiming = False  # no more claims: results go at once
        deadline = monotonic() + self.grace
        if self._running:
            log.info("stopping: waiting up to %.0fs for %d running job(s)", self.grace,
                     len(self._running))
        while self._running and monotonic() < deadline and not self.hard_stopped.is_set():
            self.hard_stopped.wait(0.05)
        with self._lock:
            left = [run for run in self._running if not run.ended]
        for run in left:
            run.stop(Cancel.SHUTDOWN)
        # Commands are killed, async calls cancelled and timed calls given up on, and each
        # releases its fire; a sync call without a timeout returns when it returns (soon,
        # if it polls stopping()). Then the fires of calls still running are given back.
        started = monotonic()
        while pending := [run for run in left if not run.ended]:
            waited = monotonic() - started
            if waited > STOP_WAIT or (waited > CALL_STOP_WAIT and not any(
                    run.job.call is None or run.job.timeout is not None or run.on_loop
                    for run in pending)):
                break
            time.sleep(0.05)
        self._pool.close()
        self._release_stuck([run for run in left if not run.ended])
        self.results.close()
        self.live.stop()
        self.hooks.close()
        self.hard_stopped.set()
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

