"""The results thread of a worker: every outcome and history line it owes goes to Redis here.

Successes are acked in one round trip per shard for all runs that finished meanwhile;
failures are failed one by one (a retry or a dead letter); lines no run owns (a fire the
claim dropped, a lapsed lease) are recorded as notes. Redis unreachable or refusing
writes for now is waited out: an unrecorded run runs again once its lease lapses.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol, TypeVar

from cronsvc.clock import monotonic
from cronsvc.config.models import Config, Job
from cronsvc.errors import LeaseLost
from cronsvc.history import Cancel, drop_explained
from cronsvc.keys import Keys, keys_for
from cronsvc.metrics.counters import NoMetrics
from cronsvc.policy import Policy
from cronsvc.process.logs import LineWriter, batched_lines, line_writer
from cronsvc.ran import RanEntries
from cronsvc.run.outcome import Outcome
from cronsvc.store.faults import REDIS_ERRORS, describe, is_outage
from cronsvc.store.scripts import ACK_CHUNK, AckCall, Claim, Scripts
from cronsvc.worker.records import (
    drop_record,
    history_json,
    history_record,
    log_dropped,
    log_outcome,
    lost_record,
    ok_line,
    run_fields,
    started_on_server,
)
from cronsvc.worker.running import Note, Running

log = logging.getLogger("cronsvc.worker")

# How long a finished run's result is retried while Redis cannot be reached.
RESULT_PATIENCE = 120.0
# Results recorded in one round trip at most.
RESULT_BATCH = 500
# Retries of a write while Redis cannot take it are at most this far apart.
RETRY_AT_MOST = 2.0
# While the claim loop takes fires due now as fast as slots free up (a second's burst of
# fires), results wait up to this long: their acks and lines would delay those fires'
# claims and starts (the GIL here, the one thread of Redis), and a fire's slot is free
# as its run ends, not once its result is in. Its lease is renewed meanwhile.
DEFER_AT_MOST = 0.05
DEFER_STEP = 0.002
# ... and while no run that ends the wait can come (no job of the config holds slots others
# wait for, no run on the loop came), only every 5 ms: a look costs the thread some 20 us of
# CPU on a VM (the sleep's wake-up), a microsecond a fire in a drain at 2 ms.
DEFER_STEP_PLAIN = 0.005
T = TypeVar("T")


class _Ack:
    """Successes to ack in one call on one shard with one history cap (a job may keep more
    than the worker's): the call, made as each run's result comes, and beside it each run
    and its outcome; whether one of them holds a slot others may wait for."""

    __slots__ = ("call", "runs", "frees")

    def __init__(self, call: AckCall) -> None:
        self.call = call
        self.runs: list[tuple[Running, Outcome]] = []
        self.frees = False


class ResultsHolder(Protocol):
    """What the results thread uses of its worker."""

    worker_id: str
    config: Config
    scripts: Scripts
    metrics: NoMetrics
    lease_ms: int
    history_cap: int
    offset_ms: int  # the server's clock minus this machine's, as of the last claim
    hard_stopped: threading.Event  # runs stop now; nothing waits on Redis any more
    # True while its last claim took all it asked for: fires due now may wait for a slot.
    claiming: bool

    def free(self, *runs: Running) -> None: ...

    def noted(self, exc: BaseException) -> None: ...

    def wake(self) -> None: ...

    def server_now(self) -> int: ...


class Results:
    """Records what the runs and claims of one worker leave behind, in a thread of its own."""

    def __init__(self, worker: ResultsHolder) -> None:
        self.w = worker
        # (run, outcome) of finished runs and notes; None ends the thread.
        self._queue: queue.SimpleQueue[tuple[Running, Outcome] | Note | None] = (
            queue.SimpleQueue())
        self._thread = threading.Thread(target=self.record_all, name="cronsvc-results",
                                        daemon=True)
        # The wait while claiming: per config, whether a job of it is bounded (the end of
        # its run ends the wait) and how often it looks (_step); whether runs on the loop
        # came (their end ends it too).
        self._steps: tuple[Config | None, bool, float] = (None, True, DEFER_STEP)
        self._loop_runs = False
        # Per job definition (by its id: the value holds it), bounded(job), of the config
        # in force (the runs of the one before go on a while).
        self._bounds: tuple[Config | None, dict[int, tuple[Job, bool]]] = (None, {})
        # Per job of the config in force (the config they were read of): its history cap;
        # per job definition: the jobs its success triggers ('a,b').
        self._caps: tuple[Config | None, dict[str, int]] = (None, {})
        self._thens: dict[str, tuple[Job, str]] = {}
        # Per job definition (by its id: the value holds it, so the id is its own while
        # there), what the ack of a success takes (_traits_of), of the config in force.
        self._traits: tuple[Config | None, dict[int, tuple[Job, int, str, bool]]] = (None, {})
        # Per shard: the names its acks use, kept from ack to ack (record strings, histories).
        self._names: dict[Keys, tuple[RanEntries, dict[str, str]]] = {}

    # -- what the worker hands over ---------------------------------------------
    def start(self) -> None:
        self._thread.start()

    def finished(self, run: Running, outcome: Outcome) -> None:
        """A run ended: record its outcome."""
        self._queue.put((run, outcome))

    @property
    def hand_over(self) -> Callable[[tuple[Running, Outcome]], None]:
        """:meth:`finished`, taking ``(run, outcome)``: the queue's own ``put``, no Python
        frame a run (the worker keeps it)."""
        return self._queue.put

    def reclaimed(self, keys: Keys, claim: Claim) -> None:
        """A fire whose holder's lease lapsed: say so, and keep that attempt in history."""
        w = self.w
        before = claim.before or {}
        log.warning("%s: reclaimed from %s (its lease lapsed); attempt %d", claim.fire_id,
                    before.get("worker", "?"), claim.token,
                    extra={"job": claim.job, "fire": claim.fire_id, "attempt": claim.token,
                           "worker": w.worker_id})
        w.metrics.reclaimed(claim.job)
        self._queue.put(Note(keys, claim.job, lost_record(claim, before)))

    def dropped(self, fires: list[tuple[str, str]]) -> None:
        """The claim script dropped these fires (id, reason): write their history lines
        (from this thread, which rides out an outage; the claim loop must not) and say
        so, one line per job and reason however many fires (a fleet back from a night away
        misses a job's every fire at once)."""
        w = self.w
        said: dict[tuple[str, str, str], list[tuple[str, int]]] = {}
        for fid, reason in fires:
            record = drop_record(fid, reason, w.worker_id)
            job = record["job"]
            keys = keys_for(job, w.config.redis.shards, w.config.redis.prefix)
            self._queue.put(Note(keys, job, record))
            said.setdefault((job, record["status"], drop_explained(reason)), []).append(
                (fid, record["scheduled"] or 0))
            w.metrics.dropped(job, reason)
        for (job, status, why), dropped in said.items():
            log_dropped(log, w.worker_id, job, dropped, status, why)

    def close(self) -> None:
        """Record what is queued, then end the thread (or, if it never started, record it
        in the caller's thread)."""
        self._queue.put(None)
        if self._thread.is_alive():
            self._thread.join()
        elif self._thread.ident is None:
            self.record_all()

    # -- the thread -------------------------------------------------------------
    def record_all(self) -> None:
        """Record results as they come, runs in batches, until the end mark."""
        last = False
        while not last:
            batch: list[tuple[Running, Outcome]] = []
            notes: list[Note] = []
            last = bool(self._take(self._queue.get(), batch, notes))
            # Not for runs holding slots in Redis others wait for (their ack frees them),
            # nor for async runs: the loop's thread, not the slots, starts the next ones,
            # and waiting made an async drain cost more (65 against 53 us a fire).
            if not last and self.w.claiming and not self._frees_slots(batch):
                last = self._defer(batch, notes)
            with batched_lines():
                self._record_batch(batch)
                self._write_notes(notes)

    def _frees_slots(self, batch: list[tuple[Running, Outcome]]) -> bool:
        """Some of these runs hold slots others may wait for, or run on the loop."""
        some = self._any_bounded()  # most configs have none: only a run on the loop may
        for run, _ in batch:
            if run.on_loop:
                self._loop_runs = True
                return True
            if some and self._bounded(run.job):
                return True
        return False

    def _bounded(self, job: Job) -> bool:
        """:func:`bounded`, asked once per job definition."""
        config, bounds = self._bounds
        if config is not self.w.config:
            config, bounds = self._bounds = (self.w.config, {})
        hit = bounds.get(id(job))
        if hit is None:
            hit = bounds[id(job)] = (job, bounded(job))
        return hit[1]

    def _any_bounded(self) -> bool:
        """Some job of the config in force is :func:`bounded`."""
        config, some, _ = self._steps
        if config is not self.w.config:
            config = self.w.config
            some = any(map(bounded, config.jobs.values()))
            self._steps = (config, some, DEFER_STEP if some else DEFER_STEP_PLAIN)
        return some

    def _step(self) -> float:
        """How often the wait while claiming looks at the claim loop and at what came:
        DEFER_STEP while a run whose ack frees a slot may come, else DEFER_STEP_PLAIN."""
        self._any_bounded()
        return DEFER_STEP if self._loop_runs else self._steps[2]

    def _take(self, item: tuple[Running, Outcome] | Note | None,
              batch: list[tuple[Running, Outcome]], notes: list[Note],
              watch: bool = False) -> bool | None:
        """Put ``item`` and what is queued behind it in ``batch`` or ``notes`` (runs and
        notes, RESULT_BATCH at most); True if the end mark came; ``watch``: None as soon as
        a run that frees a slot comes."""
        get, room = self._queue.get_nowait, RESULT_BATCH - len(batch) - len(notes)
        some = watch and self._any_bounded()  # else only a run on the loop ends the wait
        while True:
            if item is None:  # the worker is stopping and this is all
                return True
            if isinstance(item, tuple):
                batch.append(item)
                if watch and (item[0].on_loop or some and self._bounded(item[0].job)):
                    self._loop_runs = self._loop_runs or item[0].on_loop
                    return None  # its ack frees a slot another fire may wait for
            else:
                notes.append(item)
            room -= 1
            if room <= 0:
                return False
            try:
                item = get()
            except queue.Empty:
                return False

    def _defer(self, batch: list[tuple[Running, Outcome]], notes: list[Note]) -> bool:
        """Wait while the claim loop takes fires due now (at most DEFER_AT_MOST), taking
        what comes meanwhile into this batch, until it is full (waiting on would only hold
        it back: what comes next goes in the next); True if the end mark came."""
        w, until = self.w, monotonic() + DEFER_AT_MOST
        while (len(batch) + len(notes) < RESULT_BATCH and w.claiming and monotonic() < until
               and not w.hard_stopped.is_set()):
            time.sleep(self._step())  # a hard stop is seen at the next step
            if not self._queue.empty():
                took = self._take(self._queue.get_nowait(), batch, notes, watch=True)
                if took is not False:
                    return bool(took)
        return False

    def _write_notes(self, notes: list[Note]) -> None:
        w = self.w
        for note in notes:
            try:
                self.persist(lambda n=note: w.scripts.record(  # type: ignore[misc]
                    n.keys, n.job, n.record, self.history_cap(n.job)))
            except REDIS_ERRORS as exc:
                w.noted(exc)
                log.error("%s: history line not recorded: %s", note.record.get("fire"),
                          describe(exc))

    def _record_batch(self, batch: list[tuple[Running, Outcome]]) -> None:
        w = self.w
        acks: dict[tuple[Keys, int], list[_Ack]] = {}
        worker, offset = w.worker_id, w.offset_ms
        config, traits = self._traits
        if config is not w.config:
            config, traits = self._traits = (w.config, {})
        # The ack of the last success (most batches need one), its call, shard and cap.
        call: AckCall | None = None
        call_keys: Keys | None = None
        call_cap = 0
        for item in batch:
            run, outcome = item
            try:
                status = outcome.status
                if status != "ok" and (status != "cancelled"
                                       or run.cancel_reason != Cancel.REPLACED):
                    self._finish(run, outcome)
                    continue
                job, keys = run.job, run.keys
                # by id: the name would be a read of each job's dict, not in the caches
                t = traits.get(id(job))
                if t is None:
                    t = traits[id(job)] = self._traits_of(job)
                if (call is None or keys is not call_keys or t[1] != call_cap
                        or call.n >= ACK_CHUNK):
                    ack = self._ack_for(acks, keys, t[1])
                    call, call_keys, call_cap = ack.call, keys, t[1]
                claim = run.claim
                if status == "ok":
                    text, then = history_json(claim, outcome, worker, offset, "ok"), t[2]
                else:
                    text, then = history_json(claim, outcome, worker, offset,
                                              Cancel.REPLACED), ""
                call.add(claim.fire_id, claim.token, claim.job, text, then, outcome.output,
                         outcome.started_ms + offset)
                ack.runs.append(item)
                if t[3]:
                    ack.frees = True
            except REDIS_ERRORS as exc:
                self.w.noted(exc)
                log.error("%s: result not recorded, the fire will run again: %s",
                          run.claim.fire_id, describe(exc))
            except Exception:  # the worker must survive a result it cannot record
                log.exception("result of %s not recorded", run.claim.fire_id)
        for group in acks.values():
            for ack in group:
                self._ack(ack)
        w.free(*(run for run, _ in batch))

    def _ack_for(self, acks: dict[tuple[Keys, int], list[_Ack]], keys: Keys, cap: int
                 ) -> _Ack:
        """The ack of ``acks`` a success on shard ``keys`` with history cap ``cap`` goes to
        (a new one when there is none yet or the last one is full)."""
        group = acks.setdefault((keys, cap), [])
        if not group or group[-1].call.full:
            names = self._names.get(keys)
            if names is None:
                names = self._names[keys] = (RanEntries(keys), {})
            group.append(_Ack(AckCall(keys, cap, self.retention_ms, *names)))
        return group[-1]

    def _traits_of(self, job: Job) -> tuple[Job, int, str, bool]:
        """What the ack of a success of ``job`` takes: its history cap (of the config in
        force), the jobs it triggers, whether its runs hold slots others wait for."""
        return job, self.history_cap(job.name), self._then(job), self._bounded(job)

    def _finish(self, run: Running, outcome: Outcome) -> None:
        """Record a failure or a release now."""
        w = self.w
        claim, job = run.claim, run.job
        status: str = outcome.status
        lag = self.lag(run, outcome)
        stopped = run.cancel_reason
        if status == "cancelled" and stopped in (Cancel.SHUTDOWN, Cancel.LEASE_LOST):
            if stopped is Cancel.SHUTDOWN:
                self.persist(lambda: w.scripts.release(run.keys, [(claim.fire_id, claim.token)]))
            log_outcome(log, w.worker_id, claim, outcome, lag, note=stopped)
            return
        if status == "cancelled":
            status = stopped or "cancelled"
        record = history_record(claim, outcome, w.worker_id, w.offset_ms, status=status)
        retry_at = w.server_now() + int(job.retry_delay(claim.token) * 1000)
        policy = Policy.of(job)
        try:
            verdict, _ = self.persist(lambda: w.scripts.fail(
                run.keys, claim.fire_id, claim.token, claim.job, record,
                self.history_cap(job.name), job.max_attempts, retry_at, notify=policy.notify,
                pause_after=policy.pause_after, on_failure=",".join(job.on_failure),
                output=outcome.output, retention_ms=self.retention_ms,
            ))
        except LeaseLost as exc:
            log.warning("%s: result not recorded, lease taken over: %s", claim.fire_id, exc)
            return
        log_outcome(log, w.worker_id, claim, outcome, lag, note=verdict)
        if verdict == "retry" or bounded(job):
            # The claim loop last looked while this fire was in flight and sleeps up to
            # MAX_SLEEP: let it see the retry's time now, or a short backoff waits that long.
            w.wake()
        if verdict == "dead":
            w.metrics.dead(claim.job)
        w.metrics.run_finished(claim, status, lag, job.kind)

    def _ack(self, ack: _Ack) -> None:
        w = self.w
        try:
            lost = self.persist(lambda: w.scripts.acked(ack.call))
        except REDIS_ERRORS as exc:
            w.noted(exc)
            log.error("%d result(s) not recorded, their fires will run again: %s",
                      len(ack.runs), describe(exc))
            return
        if ack.frees:
            w.wake()  # a slot is free: a fire waiting for it starts now, not at the next look
        write = line_writer(log, logging.INFO)
        # The lines of most successes, written at once (those before any other line).
        lines: list[str] = []
        fields: list[dict[str, Any]] | None = None if write is None or write.plain else []
        worker, offset, metrics = w.worker_id, w.offset_ms, w.metrics
        finished = None if type(metrics) is NoMetrics else metrics.run_finished
        for (run, outcome), why in zip(ack.runs, lost, strict=True):
            claim = run.claim
            if why is not None:
                if lines:
                    self._write(write, lines, fields)
                log.warning("%s: result not recorded, lease taken over (attempt %d)",
                            claim.fire_id, claim.token)
                continue
            lag = started_on_server(outcome, offset, claim.due_ms) - claim.due_ms
            line = None if write is None else ok_line(claim, outcome, lag)
            if line is None:
                if lines:
                    self._write(write, lines, fields)
                log_outcome(log, worker, claim, outcome, lag, write=write)
            else:
                lines.append(line)
                if fields is not None:
                    fields.append(run_fields(claim, worker))
            if finished is not None:
                finished(claim, "ok" if outcome.status == "ok" else Cancel.REPLACED, lag,
                         run.job.kind)
        if lines:
            self._write(write, lines, fields)

    @staticmethod
    def _write(write: LineWriter | None, lines: list[str],
               fields: list[dict[str, Any]] | None) -> None:
        """Write these run lines (and forget them); a line not written is reported as
        logging reports it."""
        try:
            if write is not None:
                write.lines(lines, fields)
        except Exception:  # logging's way reports it (Handler.handleError)
            for n, line in enumerate(lines):
                log.info("%s", line, extra=None if fields is None else fields[n])
        lines.clear()
        if fields is not None:
            fields.clear()

    def _then(self, job: Job) -> str:
        """The jobs a success of ``job`` triggers, as the ack takes them ('a,b')."""
        hit = self._thens.get(job.name)
        if hit is None or hit[0] is not job:
            hit = self._thens[job.name] = (job, ",".join(job.on_success))
        return hit[1]

    def history_cap(self, job: str) -> int:
        """Records the history of ``job`` keeps: its own ``history``, else the worker's (of
        the config in force: asked per run, so remembered per config)."""
        config = self.w.config
        seen, caps = self._caps
        if seen is not config:
            seen, caps = self._caps = (config, {})
        cap = caps.get(job)
        if cap is None:
            found = config.jobs.get(job)
            cap = caps[job] = (self.w.history_cap if found is None
                               else found.history_cap(config.worker))
        return cap

    @property
    def retention_ms(self) -> int:
        """How long a fire's outputs are kept (``worker.output_retention``)."""
        return int(self.w.config.worker.output_retention * 1000)

    def lag(self, run: Running, outcome: Outcome) -> int:
        """How late the run started, on the server's clock (ms; never before its due
        time: :func:`started_on_server`)."""
        due = run.claim.due_ms
        return started_on_server(outcome, self.w.offset_ms, due) - due

    def persist(self, write: Callable[[], T]) -> T:
        """Run ``write`` until Redis takes it: a result is worth waiting for, since an
        unrecorded run is run again once its lease expires. Redis unreachable or refusing
        writes for now (OOM, READONLY, ...) is waited out; gives up on a hard stop or after
        RESULT_PATIENCE seconds (the fire then runs again: at least once)."""
        w = self.w
        deadline = monotonic() + RESULT_PATIENCE
        pause = 0.1
        while True:
            try:
                return write()
            except REDIS_ERRORS as exc:
                if not is_outage(exc) or w.hard_stopped.is_set() or monotonic() > deadline:
                    raise
                w.noted(exc)
                log.warning("cannot record a result yet, retrying: %s", describe(exc))
                w.hard_stopped.wait(pause)
                # Soon after Redis is back, well within a lease: until it is recorded,
                # the result holds the fire only as long as heartbeats renew its lease.
                pause = min(pause * 2, RETRY_AT_MOST, w.lease_ms / 4000)


def bounded(job: Job) -> bool:
    """Runs of ``job`` hold slots others may wait for (overlap queue, max_concurrent,
    named limits)."""
    return job.overlap == "queue" or bool(job.max_concurrent) or bool(job.slot_limits)
