"""Dead-man pings to an outside monitor, sent by a worker beside its runs.

A run never waits on a ping: pings go into a bounded queue that one thread of the
worker sends in order, each with a short timeout. A monitor that is down or slow only
makes its own pings late (or lost, when the queue is full: the monitor then says the job
went quiet, which is what it is for). A ping is a webhook's POST (``channels.post``): a
monitor answering with a redirect has not taken it, and the redirect is not followed.
"""

from __future__ import annotations

import logging
import queue
import threading

from cronsvc.config.models import Job
from cronsvc.notify.channels import DeliveryError, expand, post
from cronsvc.run.context import FireContext
from cronsvc.run.outcome import Outcome

log = logging.getLogger("cronsvc.notify")

QUEUE_SIZE = 1000
TIMEOUT_S = 10.0
#: The output a fail ping carries at most (Healthchecks keeps the first 100 kB).
BODY_CAP = 10_000


class Pinger:
    """The ping thread of one worker: a :class:`cronsvc.run.hooks.RunHook`."""

    def __init__(self, timeout: float = TIMEOUT_S) -> None:
        self.timeout = timeout
        self._queue: queue.Queue[tuple[str, str, bytes] | None] = queue.Queue(QUEUE_SIZE)
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def started(self, job: Job, ctx: FireContext) -> None:
        """A run of ``job`` begins."""
        if job.ping is not None and job.ping.start:
            self._put(job.name, job.ping.start, b"")

    def ended(self, job: Job, ctx: FireContext, outcome: Outcome) -> None:
        """A run of ``job`` ended: ok, or, on the fire's last attempt, not, with why and its
        output's tail. A failed attempt a retry follows, or a run this worker stopped (a
        cancel, a shutdown), says nothing of the job yet."""
        if job.ping is None or outcome.status == "cancelled":
            return
        ok = outcome.status == "ok"
        if not ok and ctx.attempt < job.max_attempts:  # as lua/fail-13.lua decides a retry
            return
        url = job.ping.success if ok else job.ping.fail
        if url:
            body = "" if ok else "\n".join(p for p in (outcome.error, outcome.output) if p)
            self._put(job.name, url, body[-BODY_CAP:].encode())

    def recorded(self, fire_id: str, attempt: int) -> None:
        """Nothing: a ping says how the run went, sent as it ends."""

    def wants(self, job: Job) -> bool:
        """Only jobs with pings."""
        return job.ping is not None

    def _put(self, job: str, url: str, body: bytes) -> None:
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._send_all, name="cronsvc-pings",
                                                daemon=True)
                self._thread.start()
        try:
            self._queue.put_nowait((job, url, body))
        except queue.Full:
            log.warning("%s: ping dropped: %d pings are waiting for slow monitors", job,
                        QUEUE_SIZE)

    def _send_all(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            job, url, body = item
            try:
                post(f"jobs.{job}.ping", expand(url, f"jobs.{job}.ping"), body,
                     {"Content-Type": "text/plain; charset=utf-8"}, self.timeout)
            except DeliveryError as exc:
                log.warning("%s", exc, extra={"job": job})

    def close(self) -> None:
        """Stop after the pings queued so far (the thread is a daemon: a worker that must
        stop now does not wait for it)."""
        if self._thread is not None:
            try:
                self._queue.put_nowait(None)
            except queue.Full:
                pass
