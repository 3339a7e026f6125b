"""Dispatch into a queue library (Celery): how fast 2 worker processes hand fires to the
broker, beside the library's own enqueue loop on the same broker; how fast fires go when
each waits for its outcome from a real consumer, beside that consumer's own rate; the lag
from a fire's scheduled time to its task's start; and CPU per fire.

1. Rate, ``wait: false``: fires of `celery:` jobs queued due, 2 workers drain them into
   a queue no consumer reads (a fire is done once the broker took its message), so the
   consumer's speed is not measured. Reference: ``app.send_task`` in a loop, one process,
   into the same broker, messages of the same size (the same arguments, and the
   delivery's headers under names the guard does not read), run before the fleet's drain
   and after it (their mean: other work on the machine weighs on both alike).
2. Rate, ``wait: true``: the same with a real ``celery worker --pool solo`` running each
   task (guarded) and reporting back. Reference: the same worker running as many tasks
   sent by the plain loop.
3. Lag, idle fleet: one every-second job, its task notes ``time.time()`` as it starts;
   the scheduled time is the fire id's; the history gives the part up to the run's start
   in a cronsvc worker. Reference: the same consumer's lag from ``send_task`` to the
   start of a task sent by the plain loop.
4. CPU per dispatched fire over the drain of 1: the worker processes', cronsvc's
   redis-server's, the broker's. Reference: the plain loop's process and the broker.

The broker is a redis-server of its own (cronsvc's Redis is another). One entry of
:data:`TARGETS` per library: RQ, dramatiq and arq each add one.

Run: ``.venv/bin/python -m bench.dispatch [--fires 20000] [--waited_fires 2000] [--lag 60]``
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil
import redis

from bench import common
from bench.claim import prepare
from bench.common import Figure, K, Section
from bench.throughput import drain_rate
from cronsvc.fires import parse_fire
from cronsvc.process.redis_server import RedisServer
from cronsvc.run.dispatch import HEADERS, Delivery
from cronsvc.store.scripts import Scripts
from cronsvc.testing import read_ledger, wait_for
from cronsvc.testing.queues import celery_worker

WORKERS = 2
CONCURRENCY = 32
JOBS = 100
DAY_MS = 86_400_000
NO_CONSUMER = "bench-nobody"  # a queue no worker reads
ARGS = ("core",)
KWARGS = {"size": 3}
WARM_UP = 3  # fires of the lag job not counted: the first connections are made then


@dataclass(frozen=True)
class Target:
    """How the benchmark drives one queue library."""

    kind: str  # the job's key, and the library's name
    #: (broker URL, queue or None for the default, wait, task) -> the job's target
    job: Callable[[str, str | None, bool, str], dict[str, Any]]
    #: The library's own enqueue loop: one message per delivery, its headers renamed.
    plain: Callable[[str, str | None, str, Sequence[Delivery]], None]
    #: (tmp, broker URL, cronsvc's Redis URL, ledger) -> a running consumer worker
    consumer: Callable[[Path, str, str, Path], AbstractContextManager[Any]]
    default_queue: str  # where messages sent to no named queue wait
    #: messages waiting in a queue, and the bytes of the first one
    backlog: Callable[[redis.Redis, str], int]
    size: Callable[[redis.Redis, str], int]


def disguised(delivery: Delivery) -> dict[str, str]:
    """The delivery's headers under names of the same length that no guard reads: a plain
    message as large as cronsvc's, run unguarded."""
    names = set(HEADERS.values())
    return {("x" * 7 + k[7:] if k in names else k): v for k, v in delivery.headers().items()}


def celery_job(broker: str, queue: str | None, wait: bool, task: str) -> dict[str, Any]:
    return {"task": task, "broker": broker, "args": list(ARGS), "kwargs": KWARGS,
            "wait": wait, **({"queue": queue} if queue else {})}


_APPS: dict[str, Any] = {}


def celery_plain(broker: str, queue: str | None, task: str,
                 deliveries: Sequence[Delivery]) -> None:
    from celery import Celery

    app = _APPS.get(broker) or _APPS.setdefault(broker, Celery("plain", broker=broker))
    for d in deliveries:
        app.send_task(task, args=list(ARGS), kwargs=dict(KWARGS), task_id=d.message_id,
                      headers=disguised(d), queue=queue, retry=False)


def celery_consumer(tmp: Path, broker: str, redis_url: str, ledger: Path
                    ) -> AbstractContextManager[Any]:
    root = Path(__file__).resolve().parents[1]
    return celery_worker(tmp, "bench.celery_tasks", broker, redis_url, name="bench-celery",
                         path=(root,), CRONSVC_TEST_LEDGER=str(ledger))


TARGETS = {
    "celery": Target("celery", celery_job, celery_plain, celery_consumer, "celery",
                     lambda br, q: int(br.llen(q)),
                     lambda br, q: len(br.lindex(q, 0) or b"")),
}


def deliveries(count: int, base: int) -> list[Delivery]:
    """Deliveries like those of the fires :func:`bench.claim.prepare` queues."""
    out = []
    for i in range(count):
        fid = f"job{i % JOBS:05d}@{base + (i // JOBS) * 1000}"
        out.append(Delivery(fid, fid.split("@")[0], base, 1, K.deliveries(fid)))
    return out


def cpu_s(pid: int) -> float:
    t = psutil.Process(pid).cpu_times()
    return float(t.user + t.system)


@dataclass
class Drain:
    """One drain of queued fires by the fleet: fires per second and CPU seconds per fire
    of the workers, cronsvc's Redis and the broker."""

    rate: float
    workers_us: float
    redis_us: float
    broker_us: float


def fleet_drain(target: Target, r: redis.Redis, url: str, broker_url: str, broker_pid: int,
                redis_pid: int, fires: int, queue: str | None, wait: bool) -> Drain:
    """``fires`` due fires of `JOBS` jobs of ``target``'s kind, drained by the workers."""
    prepare(r, Scripts(r), fires, JOBS, common.server_ms(r) - DAY_MS)
    spec = {"cron": "0 0 1 1 *", "catch_up": "all", "timeout": "120s",
            target.kind: target.job(broker_url, queue, wait, "bench.noop")}
    jobs = {f"job{i:05d}": spec for i in range(JOBS)}
    with common.fleet(url, jobs, worker={"history": fires // JOBS + 10}) as f:
        for i in range(WORKERS):
            f.worker(f"worker-{i}", "--concurrency", str(CONCURRENCY))
        wait_for(lambda: r.zcard(K.working) or r.zcard(K.queue) < fires, 60,
                 message="a first claim")
        pids = [p.pid for p in f.procs.values()]
        before = [cpu_s(p) for p in (*pids, redis_pid, broker_pid)]

        rate = drain_rate(r, fires, 600)[0]
        after = [cpu_s(p) for p in (*pids, redis_pid, broker_pid)]
    used = [(a - b) / fires * 1e6 for a, b in zip(after, before, strict=True)]
    return Drain(rate, sum(used[:-2]), used[-2], used[-1])


@contextmanager
def servers() -> Iterator[tuple[RedisServer, redis.Redis, RedisServer, redis.Redis]]:
    """cronsvc's Redis and the broker, each a redis-server of its own."""
    with common.redis_server() as (server, r), common.redis_server() as (broker, _):
        br = redis.Redis.from_url(broker.url)
        try:
            yield server, r, broker, br
        finally:
            br.close()


def plain_send(target: Target, broker: RedisServer, br: redis.Redis, count: int
               ) -> tuple[float, float, float]:
    """The plain loop into :data:`NO_CONSUMER`: messages per second, and CPU µs per message
    of this process and of the broker."""
    ds = deliveries(count, common.server_ms(br) - DAY_MS)
    pid = common.server_pid(broker)
    cpu0, broker0, t0 = time.process_time(), cpu_s(pid), time.perf_counter()
    target.plain(broker.url, NO_CONSUMER, "bench.noop", ds)
    took = time.perf_counter() - t0
    cpu, broker_cpu = time.process_time() - cpu0, cpu_s(pid) - broker0
    assert target.backlog(br, NO_CONSUMER) == count, "the plain loop lost messages"
    return count / took, cpu / count * 1e6, broker_cpu / count * 1e6


def stamps(ledger: Path) -> dict[str, float]:
    """Task id or fire id -> when ``bench.stamp`` started (epoch seconds)."""
    return {str(e["fire"]): float(e["started"]) for e in read_ledger(ledger)}


def plain_lag(target: Target, broker_url: str, ledger: Path, count: int) -> list[int]:
    """ms from ``send_task`` to the task's start, one message at a time (the reference of
    the lag: the consumer's own)."""
    lags = []
    for i in range(count):
        tid = f"plain-{i}"
        sent = time.time()
        target.plain(broker_url, None, "bench.stamp", [Delivery(tid, "plain", 0, 1, "-")])
        wait_for(lambda tid=tid: tid in stamps(ledger), 30, interval=0.002,
                 message="a plain task to start")
        lags.append(int((stamps(ledger)[tid] - sent) * 1000))
    return lags


@dataclass
class Lag:
    """Per fire, ms from its scheduled time to each step: the run's start in a cronsvc
    worker (history), its delivery begun, sent (the broker took it), started by the
    consumer's guard (the deliveries' stream, on the Redis clock), the task's start."""

    steps: dict[str, list[int]]

    def total(self) -> list[int]:
        return self.steps["task"]

    def line(self) -> str:
        parts = []
        for name in self.steps:
            p50, p99, _ = common.lag_summary(self.steps[name])
            parts.append(f"{name} p50 {common.ms(p50)}, p99 {common.ms(p99)}")
        return "; ".join(parts)


def fire_steps(r: redis.Redis, fid: str, due: int) -> dict[str, int]:
    """ms after ``due`` at which the deliveries' stream of ``fid`` reached each state."""
    return {fields["state"]: int(fields["t"]) - due
            for _, fields in r.xrange(K.deliveries(fid)) if fields.get("d") == "1"}


def fleet_lag(target: Target, r: redis.Redis, url: str, broker_url: str, ledger: Path,
              count: int) -> Lag:
    """From scheduled time to the task's start, step by step: one every-second job,
    ``count`` fires after :data:`WARM_UP`, a planner and the workers, otherwise idle."""
    r.flushall()
    jobs = {"tick": {"cron": "* * * * * *", "timeout": "30s",
                     target.kind: target.job(broker_url, None, True, "bench.stamp")}}
    with common.fleet(url, jobs) as f:
        f.planner()
        for i in range(WORKERS):
            f.worker(f"worker-{i}")

        def fires() -> list[tuple[int, float]]:
            return sorted((parse_fire(fid)[1], t) for fid, t in stamps(ledger).items()
                          if fid.startswith("tick@"))

        wait_for(lambda: len(fires()) >= count + WARM_UP, count + 60,
                 message=f"{count + WARM_UP} fires of the lag job")
    runs = {rec["fire"]: rec for rec in common.histories(r, ["tick"])}
    lag = Lag({"run": [], "sending": [], "sent": [], "started": [], "task": []})
    for due, t in fires()[WARM_UP:WARM_UP + count]:
        fid = f"tick@{due}"
        marks = {"run": int(runs.get(fid, {}).get("started") or 0) - due,
                 **fire_steps(r, fid, due), "task": int(t * 1000) - due}
        for name, values in lag.steps.items():
            if name in marks:
                values.append(marks[name])
    return lag


def waited(target: Target, server: RedisServer, r: redis.Redis, broker: RedisServer,
           br: redis.Redis, count: int, lag_fires: int
           ) -> tuple[float, Drain, Lag, list[int]]:
    """With a real consumer: its own rate on ``count`` plain messages, the fleet's with
    ``wait: true``, and the lags (the fleet's, the plain loop's)."""
    with tempfile.TemporaryDirectory(prefix="cronsvc-consumer-") as tmp:
        ledger = Path(tmp) / "stamps.jsonl"
        target.plain(broker.url, None, "bench.noop",
                     deliveries(count, common.server_ms(br) - DAY_MS))
        with target.consumer(Path(tmp), broker.url, server.url, ledger):
            own = common.drained(lambda: target.backlog(br, target.default_queue), count,
                                 600)[0]
            drain = fleet_drain(target, r, server.url, broker.url, common.server_pid(broker),
                                common.server_pid(server), count, None, True)
            lag = fleet_lag(target, r, server.url, broker.url, ledger, lag_fires)
            ref = plain_lag(target, broker.url, ledger, lag_fires)
    return own, drain, lag, ref


@dataclass
class Results:
    """What one run measured (see the module's docstring)."""

    fires: int
    waited_fires: int
    before: float  # the plain loop's messages/s, before the fleet's drain
    after: float  # and after it
    plain_us: float  # its process's CPU µs per message
    plain_broker_us: float
    sent: Drain  # the fleet, `wait: false`
    took: int  # messages in the queue after that drain
    sizes: tuple[int, int]  # bytes of a message: cronsvc's, the plain loop's
    own: float  # the consumer's tasks/s on plain messages
    drain: Drain  # the fleet, `wait: true`
    lag: Lag
    ref: list[int]  # ms from send_task to start, plain messages


def measure(fires: int = 20_000, waited_fires: int = 2_000, lag: int = 60,
            kind: str = "celery") -> Section:
    target = TARGETS[kind]
    with servers() as (server, r, broker, br):
        # The plain loop before and after the fleet: a machine whose other work comes and
        # goes weighs on both alike.
        before, plain_us, plain_broker_us = plain_send(target, broker, br, fires)
        size = target.size(br, NO_CONSUMER)
        br.delete(NO_CONSUMER)
        sent = fleet_drain(target, r, server.url, broker.url, common.server_pid(broker),
                           common.server_pid(server), fires, NO_CONSUMER, False)
        took, size_ours = target.backlog(br, NO_CONSUMER), target.size(br, NO_CONSUMER)
        br.delete(NO_CONSUMER)
        after = plain_send(target, broker, br, fires)[0]
        br.delete(NO_CONSUMER)
        own, drain, steps, ref = waited(target, server, r, broker, br, waited_fires, lag)
    return report(kind, Results(fires, waited_fires, before, after, plain_us,
                                plain_broker_us, sent, took, (size_ours, size), own, drain,
                                steps, ref))


def report(kind: str, m: Results) -> Section:
    section = Section(f"Dispatch into {kind} (2 worker processes, a redis-server broker)")
    plain = (m.before + m.after) / 2
    ratio = m.sent.rate / plain
    section.figures.append(Figure(
        f"dispatch rate into {kind}, `wait: false`, no consumer",
        f"{common.rate(m.sent.rate)} fires/s", "ratio >= 0.7",
        f"`send_task` in a loop, one process, same broker and message size: "
        f"{common.rate(plain)} messages/s (ratio {ratio:.2f}; {common.rate(m.before)} "
        f"before the fleet's drain, {common.rate(m.after)} after)", ratio >= 0.7))
    section.figures.append(Figure(
        f"dispatch rate into {kind}, `wait: true`, one consumer (`--pool solo`)",
        f"{common.rate(m.drain.rate)} fires/s",
        reference=f"the same consumer running tasks of the plain loop: "
                  f"{common.rate(m.own)} tasks/s (ratio {m.drain.rate / m.own:.2f})"))
    lags = m.lag.total()
    p50, p99, top = common.lag_summary(lags)
    r50, r99, rtop = common.lag_summary(m.ref)
    section.figures.append(Figure(
        f"lag from scheduled time to the task's start, idle fleet ({len(lags)} fires)",
        f"p50 {common.ms(p50)}, p99 {common.ms(p99)}, max {common.ms(top)}", "p99 < 20 ms",
        f"the same consumer, from `send_task` to start, one at a time: p50 {common.ms(r50)}, "
        f"p99 {common.ms(r99)}, max {common.ms(rtop)} ({len(m.ref)} tasks)", p99 < 20))
    section.figures.append(Figure(
        "CPU per dispatched fire (`wait: false`)",
        f"workers {m.sent.workers_us:.0f} µs, cronsvc's redis-server "
        f"{m.sent.redis_us:.0f} µs, broker {m.sent.broker_us:.0f} µs",
        reference=f"the plain loop: its process {m.plain_us:.0f} µs, broker "
                  f"{m.plain_broker_us:.0f} µs per message"))
    section.notes += [
        "lag, step by step from scheduled time (run: its start in a cronsvc worker; "
        "sending, sent, started: the deliveries' stream, on the Redis clock; task: its "
        f"start): {m.lag.line()}.",
        f"{m.fires:,} fires of {JOBS} jobs queued due, {WORKERS} workers --concurrency "
        f"{CONCURRENCY}; {m.took:,} messages in the queue after the drain "
        f"({'each fire sent once' if m.took == m.fires else 'CORRECTNESS PROBLEM'}); "
        f"a message: {m.sizes[0]:,} bytes from cronsvc, {m.sizes[1]:,} from the plain loop.",
        f"`wait: true`: {m.waited_fires:,} fires, each held until its task reported back; "
        f"CPU per fire: workers {m.drain.workers_us:.0f} µs, cronsvc's redis-server "
        f"{m.drain.redis_us:.0f} µs (the guard's calls included), broker "
        f"{m.drain.broker_us:.0f} µs."]
    return section


if __name__ == "__main__":
    common.cli(__doc__, measure, fires=20_000, waited_fires=2_000, lag=60)
