"""Dispatch into each queue library (Celery, RQ, dramatiq, arq): how fast 2 worker
processes hand fires to the broker, beside the library's own enqueue loop on the same
broker; how fast fires go when each waits for its outcome from a real consumer, beside
that consumer's own rate; the lag from a fire's scheduled time to its task's start; the
first fire of a fresh worker; and CPU per fire. How each library is driven:
:mod:`bench.dispatch_targets`.

1. Rate, ``wait: false``: fires queued due, 2 workers drain them into a queue no
   consumer reads (a fire is done once the broker took its message), so the consumer's
   speed is not measured. Reference: the library's own enqueue loop, one process, into
   the same broker, messages of the same size, run before the fleet's drain and after
   it (their mean: other work on the machine weighs on both alike). Where the library
   has a batch API (RQ's ``enqueue_many``), it is a second reference.
2. Rate, ``wait: true``: the same with a real consumer running each task (guarded) and
   reporting back. Reference: the same consumer running as many plain messages.
3. Lag, idle fleet: 5 every-second jobs, their fires 200 ms apart, the task notes
   ``time.time()`` as it starts; split by step (:mod:`bench.dispatch_lag`). Reference:
   the same consumer's lag from the plain loop's send to the task's start.
4. First fire of a worker started 2 s before, as it is (its queue clients made ahead)
   and without (:mod:`bench.unprepared`), alternately.
5. CPU per dispatched fire over the drain of 1: the worker processes', cronsvc's
   redis-server's, the broker's. Reference: the plain loop's process and the broker.

The broker is a redis-server of its own (cronsvc's Redis is another). arq's part runs in
``.venv-arq`` (arq pins redis-py 5): this module runs itself there and reads its figures.

Run: ``.venv/bin/python -m bench.dispatch [--kinds celery,rq,dramatiq,arq] [--fires 20000]
[--waited_fires 1000] [--lag 300]``
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path

import psutil
import redis

from bench import common
from bench.claim import prepare
from bench.common import Figure, K, Section
from bench.dispatch_lag import (
    COLD_TRIES,
    Lag,
    cold_first_fires,
    fleet_lag,
    plain_lag,
    summary,
)
from bench.dispatch_targets import ROOT, TARGETS, Target
from bench.throughput import drain_rate
from cronsvc.process.redis_server import RedisServer
from cronsvc.run.dispatch import Delivery
from cronsvc.store.scripts import Scripts
from cronsvc.testing import wait_for

WORKERS = 2
CONCURRENCY = 32
JOBS = 100
DAY_MS = 86_400_000
NO_CONSUMER = "bench-nobody"  # a queue no worker reads


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
            target.kind: target.job(broker_url, queue, wait, target.tasks["noop"])}
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


def clear(br: redis.Redis) -> None:
    """Every message and job the broker holds; kombu's bindings stay (the plain loop's
    Celery app declared its queue once, and routes by them)."""
    keys = [k for k in br.scan_iter(count=1000) if not k.startswith(b"_kombu")]
    for i in range(0, len(keys), 1000):
        br.delete(*keys[i:i + 1000])


def plain_send(target: Target, broker: RedisServer, br: redis.Redis, count: int,
               send: Callable[[str, str | None, str, Sequence[Delivery]], None] | None = None
               ) -> tuple[float, float, float]:
    """The plain loop (or ``send``) into :data:`NO_CONSUMER`: messages per second, and
    CPU µs per message of this process and of the broker."""
    ds = deliveries(count, common.server_ms(br) - DAY_MS)
    pid = common.server_pid(broker)
    cpu0, broker0, t0 = time.process_time(), cpu_s(pid), time.perf_counter()
    (send or target.plain)(broker.url, NO_CONSUMER, target.tasks["noop"], ds)
    took = time.perf_counter() - t0
    cpu, broker_cpu = time.process_time() - cpu0, cpu_s(pid) - broker0
    assert target.backlog(br, NO_CONSUMER) == count, "the plain loop lost messages"
    return count / took, cpu / count * 1e6, broker_cpu / count * 1e6


def waited(target: Target, server: RedisServer, r: redis.Redis, broker: RedisServer,
           br: redis.Redis, count: int, lag_fires: int
           ) -> tuple[float, Drain, Lag, list[int], tuple[list[int], list[int]]]:
    """With a real consumer: its own rate on ``count`` plain messages, the fleet's with
    ``wait: true``, the lags (the fleet's, the plain loop's) and first fires."""
    with tempfile.TemporaryDirectory(prefix="cronsvc-consumer-") as tmp:
        ledger = Path(tmp) / "stamps.jsonl"
        target.plain(broker.url, None, target.tasks["noop"],
                     deliveries(count, common.server_ms(br) - DAY_MS))
        with target.consumer(Path(tmp), broker.url, server.url, ledger) as consumer:

            def left() -> int:
                if consumer.proc.poll() is not None:
                    raise RuntimeError(f"the {target.kind} consumer exited: "
                                       f"{consumer.log()[-2000:]}")
                return target.backlog(br, target.default_queue)

            own = common.drained(left, count, 600)[0]
            drain = fleet_drain(target, r, server.url, broker.url, common.server_pid(broker),
                                common.server_pid(server), count, None, True)
            lag = fleet_lag(target, r, server.url, broker.url, ledger, lag_fires, WORKERS)
            ref = plain_lag(target, broker.url, ledger, lag_fires)
            cold = cold_first_fires(target, r, server.url, broker.url, ledger, COLD_TRIES)
    return own, drain, lag, ref, cold


@dataclass
class Results:
    """What one run measured for one library (see the module's docstring)."""

    fires: int
    waited_fires: int
    before: float  # the plain loop's messages/s, before the fleet's drain
    after: float  # and after it
    batch: float | None  # the batch API's messages/s, where there is one
    plain_us: float  # the plain loop's process's CPU µs per message
    plain_broker_us: float
    sent: Drain  # the fleet, `wait: false`
    took: int  # messages in the queue after that drain
    sizes: tuple[int, int]  # bytes of a message: cronsvc's, the plain loop's
    own: float  # the consumer's tasks/s on plain messages
    drain: Drain  # the fleet, `wait: true`
    lag: Lag
    ref: list[int]  # ms from the plain loop's send to start
    cold: tuple[list[int], list[int]]  # first fires: prepared, unprepared
    load: tuple[float, float]  # 1-minute load average at the start and the end


def measure_one(kind: str, fires: int, waited_fires: int, lag: int) -> Section:
    """One library's figures, measured in this interpreter."""
    target = TARGETS[kind]
    load0 = os.getloadavg()[0]
    with servers() as (server, r, broker, br):
        # The plain loop before and after the fleet: a machine whose other work comes and
        # goes weighs on both alike.
        before, plain_us, plain_broker_us = plain_send(target, broker, br, fires)
        size = target.size(br, NO_CONSUMER)
        clear(br)
        batch = None
        if target.batch is not None:
            batch = plain_send(target, broker, br, fires, target.batch)[0]
            clear(br)
        sent = fleet_drain(target, r, server.url, broker.url, common.server_pid(broker),
                           common.server_pid(server), fires, NO_CONSUMER, False)
        took, size_ours = target.backlog(br, NO_CONSUMER), target.size(br, NO_CONSUMER)
        clear(br)
        after = plain_send(target, broker, br, fires)[0]
        clear(br)
        own, drain, steps, ref, cold = waited(target, server, r, broker, br, waited_fires, lag)
    return report(target, Results(fires, waited_fires, before, after, batch, plain_us,
                                  plain_broker_us, sent, took, (size_ours, size), own, drain,
                                  steps, ref, cold, (load0, os.getloadavg()[0])))


def measure_elsewhere(python: Path, kind: str, fires: int, waited_fires: int,
                      lag: int) -> Section:
    """One library's figures, measured by this module run in ``python`` (arq's venv)."""
    if not python.exists():
        raise RuntimeError(f"{python} is missing: `make install-arq` builds it")
    with tempfile.TemporaryDirectory(prefix="cronsvc-bench-") as tmp:
        out = Path(tmp) / "section.json"
        subprocess.run([str(python), "-m", "bench.dispatch", "--kinds", kind, "--fires",
                        str(fires), "--waited_fires", str(waited_fires), "--lag", str(lag),
                        "--json", str(out)], cwd=ROOT, check=True)
        data = json.loads(out.read_text())[0]
    return Section(data["title"], [Figure(**f) for f in data["figures"]], data["notes"])


def measure(fires: int = 20_000, waited_fires: int = 1_000, lag: int = 300,
            kinds: str = ",".join(TARGETS)) -> Section:
    """Every library's figures, one after the other, as one section."""
    section = Section("Dispatch into Celery, RQ, dramatiq and arq (2 worker processes, "
                      "a redis-server broker)")
    for kind in kinds.split(","):
        python = TARGETS[kind].python
        one = (measure_one(kind, fires, waited_fires, lag)
               if python is None or Path(sys.executable) == python else
               measure_elsewhere(python, kind, fires, waited_fires, lag))
        section.figures += one.figures
        section.notes += one.notes
    return section


def report(target: Target, m: Results) -> Section:
    kind = target.kind
    section = Section(f"Dispatch into {kind}")
    plain = (m.before + m.after) / 2
    ratio = m.sent.rate / plain
    section.figures.append(Figure(
        f"dispatch rate into {kind}, `wait: false`, no consumer",
        f"{common.rate(m.sent.rate)} fires/s", "ratio >= 0.7",
        f"the plain loop, one process, same broker and message size: "
        f"{common.rate(plain)} messages/s (ratio {ratio:.2f}; {common.rate(m.before)} "
        f"before the fleet's drain, {common.rate(m.after)} after)", ratio >= 0.7))
    if m.batch is not None:
        section.figures.append(Figure(
            f"dispatch rate into {kind} against its batch API",
            f"{common.rate(m.sent.rate)} fires/s",
            "beat the plain loop (a batch API's rate)",
            f"`enqueue_many`, pipelined batches of 100: {common.rate(m.batch)} messages/s "
            f"(ratio {m.sent.rate / m.batch:.2f}); the plain loop {common.rate(plain)}",
            m.sent.rate > plain))
    section.figures.append(Figure(
        f"dispatch rate into {kind}, `wait: true`, one consumer",
        f"{common.rate(m.drain.rate)} fires/s",
        reference=f"the same consumer running tasks of the plain loop: "
                  f"{common.rate(m.own)} tasks/s (ratio {m.drain.rate / m.own:.2f})"))
    lags = m.lag.total()
    p99 = common.lag_summary(lags)[1]
    section.figures.append(Figure(
        f"lag into {kind}, scheduled time to the task's start, idle fleet "
        f"({len(lags)} fires)", summary(lags), "p99 < 20 ms",
        f"the same consumer, from the plain loop's send to start, one at a time: "
        f"{summary(m.ref)} ({len(m.ref)} tasks)", p99 < 20))
    section.figures.append(Figure(
        f"first fire into {kind} of a worker started 2 s before, trigger to the task's "
        f"start", "ms: " + ", ".join(map(str, m.cold[0])),
        reference="the same worker without its queue clients made ahead: ms: "
                  + ", ".join(map(str, m.cold[1]))))
    section.figures.append(Figure(
        f"CPU per dispatched fire into {kind} (`wait: false`)",
        f"workers {m.sent.workers_us:,.0f} µs, cronsvc's redis-server "
        f"{m.sent.redis_us:,.0f} µs, broker {m.sent.broker_us:,.0f} µs",
        reference=f"the plain loop: its process {m.plain_us:,.0f} µs, broker "
                  f"{m.plain_broker_us:,.0f} µs per message"))
    section.notes += [
        f"{kind}: load average (1 min) {m.load[0]:.2f} at the start, {m.load[1]:.2f} at "
        f"the end; " + "; ".join(target.notes) + ".",
        f"{kind}: lag by step, ms after the scheduled time (run: its start in a cronsvc "
        "worker; sending, sent, started: the deliveries' stream, on the Redis clock; "
        "task: its start): " + "; ".join(m.lag.lines()) + ".",
        f"{kind}: {m.fires:,} fires of {JOBS} jobs queued due, {WORKERS} workers "
        f"--concurrency {CONCURRENCY}; {m.took:,} messages in the queue after the drain "
        f"({'each fire sent once' if m.took == m.fires else 'CORRECTNESS PROBLEM'}); "
        f"a message: {m.sizes[0]:,} bytes from cronsvc, {m.sizes[1]:,} from the plain loop.",
        f"{kind}: `wait: true`: {m.waited_fires:,} fires, each held until its task reported "
        f"back; CPU per fire: workers {m.drain.workers_us:,.0f} µs, cronsvc's redis-server "
        f"{m.drain.redis_us:,.0f} µs (the guard's calls included), broker "
        f"{m.drain.broker_us:,.0f} µs."]
    return section


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--kinds", default=",".join(TARGETS))
    ap.add_argument("--fires", type=int, default=20_000)
    ap.add_argument("--waited_fires", type=int, default=1_000)
    ap.add_argument("--lag", type=int, default=300)
    ap.add_argument("--json", type=Path, default=None,
                    help="write the section here as JSON (a run in another venv)")
    opts = ap.parse_args()
    section = measure(opts.fires, opts.waited_fires, opts.lag, opts.kinds)
    if opts.json is not None:
        opts.json.write_text(json.dumps([asdict(section)]))
    else:
        section.print()


if __name__ == "__main__":
    main()
