"""Prometheus metrics: what each process does, and the fleet's state in Redis.

A worker counts what it sees (runs, drops, reclaims, dead letters, fire lag,
busy slots). The planner also exports the fleet's state, read from Redis when
Prometheus scrapes: queues, leases, live workers and, per job, its fire times
and last success. Only the planner does, so those series exist once per
planner rather than once per worker.

Each :class:`Metrics` owns its registry, so several may live in one process
(tests, an embedded fleet). A process without ``--metrics-port`` uses
:data:`NO_METRICS`, whose methods do nothing, and never imports
``prometheus_client``, so a process without metrics starts quickly.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from cronsvc.clock import SYSTEM
from cronsvc.history import drop_status

if TYPE_CHECKING:
    import redis

    from cronsvc.config.models import Config
    from cronsvc.store.scripts import Claim

log = logging.getLogger("cronsvc.metrics")

# Fire lag, from 1 ms (the target of an idle fleet) to a minute (something is wrong).
LAG_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
               30.0, 60.0)

class NoMetrics:
    """Metrics that record nothing: what a process without a metrics port uses."""

    port: int | None = None

    def run_finished(self, claim: Claim, status: str, lag_ms: int | None = None,
                     kind: str = "") -> None:
        """An attempt ended with ``status`` and its result is recorded in Redis."""

    def dropped(self, job: str, reason: str) -> None:
        """The claim script dropped a fire of ``job`` (reason as in its history line)."""

    def reclaimed(self, job: str) -> None:
        """A fire whose lease had expired was claimed again."""

    def given_back(self, job: str) -> None:
        """A fire prefetched beyond the slots went back to the queue: no slot took it in
        time."""

    def redis_error(self, code: str) -> None:
        """Redis refused a command or could not be reached (``code``: OOM, READONLY, ...)."""

    def dead(self, job: str) -> None:
        """A fire ran out of attempts and went to the dead letters."""

    def worker_slots(self, busy: Callable[[], int], slots: int) -> None:
        """Export this worker's slots; ``busy`` is called at each scrape."""

    def ticked(self, planned: int) -> None:
        """A planner tick ended."""

    def watch_fleet(self, client: redis.Redis, config: Callable[[], Config]) -> None:
        """Export the fleet's state, read from ``client`` at each scrape."""


NO_METRICS = NoMetrics()


class Metrics(NoMetrics):
    """Counters and gauges of one process, in a registry of its own."""

    def __init__(self) -> None:
        from prometheus_client import CollectorRegistry, Counter, Histogram


        self.registry = CollectorRegistry()
        self._server: Any = None
        reg = self.registry
        self._runs = Counter("cronsvc_runs", "Attempts finished, by outcome.",
                             ["job", "status"], registry=reg)
        self._dropped = Counter(
            "cronsvc_fires_dropped",
            "Fires not run: status missed or skipped, reason as the claim script gave it.",
            ["job", "status", "reason"], registry=reg)
        self._reclaimed = Counter("cronsvc_reclaimed", "Fires claimed again after their "
                                  "lease expired (a worker died or lost Redis).", ["job"],
                                  registry=reg)
        self._dead = Counter("cronsvc_dead", "Fires that ran out of attempts.", ["job"],
                             registry=reg)
        self._given_back = Counter(
            "cronsvc_prefetch_given_back", "Fires prefetched beyond the slots that went back "
            "to the queue: no slot of the worker took them in time.", ["job"], registry=reg)
        self._redis_errors = Counter(
            "cronsvc_redis_errors", "Redis errors this process rode out, by code: an error "
            "reply (OOM, READONLY, MISCONF, LOADING...) or the exception of a lost connection.",
            ["code"], registry=reg)
        self._lag = Histogram("cronsvc_fire_lag_seconds", "Start of a fire's first attempt "
                              "minus its due time, on the Redis clock.", ["kind"],
                              buckets=LAG_BUCKETS, registry=reg)

    def run_finished(self, claim: Claim, status: str, lag_ms: int | None = None,
                     kind: str = "") -> None:
        self._runs.labels(claim.job, status).inc()
        # Later attempts start after a backoff or a lease expiry: that is not lag.
        if lag_ms is not None and claim.token == 1:
            self._lag.labels(kind).observe(max(lag_ms, 0) / 1000)

    def dropped(self, job: str, reason: str) -> None:
        status = drop_status(reason)
        if status == "dead":
            self.dead(job)
        else:
            self._dropped.labels(job, status, reason).inc()

    def reclaimed(self, job: str) -> None:
        self._reclaimed.labels(job).inc()

    def given_back(self, job: str) -> None:
        self._given_back.labels(job).inc()

    def redis_error(self, code: str) -> None:
        self._redis_errors.labels(code).inc()

    def dead(self, job: str) -> None:
        self._dead.labels(job).inc()

    # A process is a worker or a planner: the unlabelled series of each role are
    # made by the call that tells which one it is, so the other role's stay out.
    def worker_slots(self, busy: Callable[[], int], slots: int) -> None:
        from prometheus_client import Gauge

        Gauge("cronsvc_worker_busy_slots", "Runs in progress in this worker.",
              registry=self.registry).set_function(busy)
        Gauge("cronsvc_worker_slots", "Runs this worker may hold at once.",
              registry=self.registry).set(slots)

    def watch_fleet(self, client: redis.Redis, config: Callable[[], Config]) -> None:
        from prometheus_client import Counter, Gauge

        reg = self.registry
        self._ticks = Counter("cronsvc_planner_ticks", "Planner ticks done.", registry=reg)
        self._planned = Counter("cronsvc_planner_fires_planned", "Fires this planner queued.",
                                registry=reg)
        self._last_tick = Gauge("cronsvc_planner_last_tick_timestamp_seconds",
                                "When this planner's last tick ended.", registry=reg)
        from cronsvc.metrics.fleet import FleetCollector

        reg.register(FleetCollector(client, config))  # type: ignore[arg-type]

    def ticked(self, planned: int) -> None:
        """A planner tick ended having queued ``planned`` fires (after :meth:`watch_fleet`,
        which the planner calls first)."""
        self._ticks.inc()
        self._planned.inc(planned)
        self._last_tick.set(SYSTEM.now_ms() / 1000)

    # -- serving ---------------------------------------------------------------
    def serve(self, port: int, addr: str = "127.0.0.1") -> int:
        """Serve ``/metrics`` over HTTP from a daemon thread; the port (0 picks a free one)."""
        from prometheus_client import start_http_server

        self._server, _ = start_http_server(port, addr, registry=self.registry)
        self.port = int(self._server.server_port)
        return self.port

    def close(self) -> None:
        """Stop serving."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None


def start_metrics(port: int | None, addr: str = "127.0.0.1") -> Metrics | None:
    """Metrics served on ``addr``:``port``, or None when no port is given (nothing is
    recorded)."""
    if port is None:
        return None
    metrics = Metrics()
    bound = metrics.serve(port, addr)
    log.info("metrics on http://%s:%d/metrics", f"[{addr}]" if ":" in addr else addr, bound)
    return metrics
