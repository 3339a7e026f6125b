"""A periodic tick driven by APScheduler, with stop, extra ticks on request and signals.

Ticks never overlap and a late one is coalesced into a single run. A tick
requested while one runs (SIGHUP during a slow tick) runs right after it
rather than an interval later.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable
from datetime import UTC

from apscheduler.schedulers.background import BackgroundScheduler

from cronsvc.clock import now_dt
from cronsvc.process.signals import handle_signals

JOB_ID = "cronsvc-tick"


class Ticker:
    """Calls ``fn(requested)`` every ``interval()`` seconds until :meth:`stop`.

    ``requested`` is True for a tick asked for with :meth:`request`. ``fn``
    must not raise. ``interval`` is read again after each tick, so a reloaded
    setting takes effect.
    """

    def __init__(self, fn: Callable[[bool], None], interval: Callable[[], float]) -> None:
        self._fn = fn
        self._interval = interval
        self._every = 0.0
        self._lock = threading.RLock()  # a second SIGHUP may arrive inside request()
        self._busy = False
        self._requested = False
        self._stop = threading.Event()
        self._scheduler: BackgroundScheduler | None = None

    def run(self) -> None:
        """Tick at once, then every interval, until stopped (SIGTERM or SIGINT stop it,
        SIGHUP requests a tick when called from the main thread)."""
        restore = self._install_signals()
        scheduler = BackgroundScheduler(timezone=UTC)
        self._every = self._interval()
        scheduler.add_job(
            self._tick, "interval", seconds=self._every, id=JOB_ID, coalesce=True,
            max_instances=1, next_run_time=now_dt(), misfire_grace_time=None,
        )
        self._scheduler = scheduler
        scheduler.start()
        try:
            while not self._stop.wait(1.0):
                pass
        finally:
            scheduler.shutdown(wait=True)
            self._scheduler = None
            restore()

    def stop(self) -> None:
        """Make :meth:`run` return once the tick in progress is done."""
        self._stop.set()

    def request(self) -> None:
        """Tick as soon as possible with ``requested=True``."""
        with self._lock:
            self._requested = True
            scheduler = None if self._busy or self._stop.is_set() else self._scheduler
        if scheduler is not None:
            try:
                scheduler.modify_job(JOB_ID, next_run_time=now_dt())
            except Exception:  # shutting down: the request is moot
                pass

    def _tick(self) -> None:
        with self._lock:
            self._busy = True
        try:
            while not self._stop.is_set():
                with self._lock:
                    requested, self._requested = self._requested, False
                self._fn(requested)
                with self._lock:
                    if not self._requested:
                        break
            every = self._interval()
            if self._scheduler is not None and every != self._every:
                self._every = every
                self._scheduler.reschedule_job(JOB_ID, trigger="interval", seconds=every)
        finally:
            with self._lock:
                self._busy = False

    def _install_signals(self) -> Callable[[], None]:
        return handle_signals({
            signal.SIGTERM: self.stop, signal.SIGINT: self.stop, signal.SIGHUP: self.request,
        })
