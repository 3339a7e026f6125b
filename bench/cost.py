"""The cost of a fire: CPU time per fire of the workers and of redis-server, by kind.

Rates on a shared machine swing with its other work; the CPU time a fire costs swings
much less. For each kind, ``fires`` due fires of ``JOBS`` jobs are drained by 2 worker
processes (``--concurrency 100``), as ``bench/throughput.py`` drains them:

- worker CPU per fire: the CPU time (user + system) of each worker's whole process tree
  (the worker, its watchdog, the commands it ran and reaped) over the drain, over the
  fires; the workers start, write what they hold and fall idle before the fires appear
  (one RENAME of a queue planned aside), so start-up is not counted;
- redis-server CPU per fire: the server's CPU time (``/proc``, as ``INFO cpu`` reads it)
  over the same drain, over the fires: claim + ack (+ fail, for fires that fail);
- the rate, and its ratio to the claim script's ceiling measured in the same run
  (pipelined pre-encoded EVALSHA calls of 100, ``bench/claim.py``).

``http`` jobs send a GET to ``bench/http_sink.py``'s server (a process of its own, which
answers 204 and counts the requests: every fire must have reached it). Dispatch kinds
(``celery``, ``rq``, ``dramatiq``, ``arq``: ``wait: false`` into a queue no consumer
reads) are drained by ``bench/dispatch.py``'s own fleet (32 slots each), their broker a
redis-server of their own; arq's in ``.venv-arq`` (arq pins redis-py 5).

``--threads`` splits the no-op ``call`` drain's worker CPU by thread: each thread's run time
(``/proc/PID/task/TID/schedstat``, in ns) over the drain, both workers summed, by the
thread's name (read with ``py-spy dump``; the slot threads counted together); with
``--compare DIR``, for DIR's code and this tree's, interleaved, ``--rounds`` each.

``--profile NAME`` also samples worker-0 with ``py-spy`` over the no-op ``call`` drain:
``bench/profiles/NAME.svg`` (a flame graph) and ``NAME.txt`` (collapsed stacks), whose top
costs ``--top NAME`` sums; with ``--compare DIR``, each version's first no-op ``call``
drain into ``NAME-before`` and ``NAME-after``.

``--compare DIR`` measures two versions on the same machine state: the claim and ack
scripts' ceilings of ``DIR`` (its lua, called by its code) and of this tree, then drains
of each ``--kinds`` by workers running the cronsvc of ``DIR`` (a copy of another
version, e.g. ``git archive main cronsvc lua bench | tar -x -C DIR``) and by this tree's,
interleaved, ``--rounds`` each; with ``--lag SECONDS`` instead the loaded lag of
``bench/lag.py``, with ``--idle SECONDS`` its idle lag (and APScheduler's in each round),
with ``--burst N`` the burst of ``bench/schedules.py``.

Run: ``.venv/bin/python -m bench.cost [--fires 50000] [--kinds call,async,command,http,rq,arq]``
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil
import redis

from bench import common, http_sink
from bench.claim import ceiling, plain_commands, prepare, primitives
from bench.common import Figure, K, Section
from cronsvc.store.scripts import Scripts, load_sources
from cronsvc.testing import wait_for

WORKERS = 2
CONCURRENCY = 100
JOBS = 1000
DAY_MS = 86_400_000
STAGED = "bench:staged"  # the planned fires wait here until the workers are idle
PROFILES = Path(__file__).resolve().parent / "profiles"

#: kind -> (job keys, fires per 100,000 asked for: a process per fire costs more)
KINDS: dict[str, tuple[dict[str, Any], float]] = {
    "call": ({"call": "bench.jobs:noop"}, 1.0),
    "async": ({"call": "bench.jobs:async_noop"}, 1.0),
    "command": ({"command": ["true"]}, 0.05),
    # a GET of bench/http_sink.py's server, which answers 204 (the URL is filled in)
    "http": ({"http": {"url": ""}}, 0.05),
}
DISPATCH = ("celery", "rq", "dramatiq", "arq")
TARGETS = {"call": 15.0}  # worker µs per no-op `call` fire at most
REDIS_TARGET = 12.0  # redis-server µs per fire, claim + ack, at most
RATIO_TARGET = 0.5  # no-op `call` drain rate over the claim ceiling, at least


def tree_cpu(pid: int, system_only: bool = False) -> float:
    """CPU seconds of a process and every descendant, living or reaped (``system_only``:
    in the kernel only)."""
    try:
        root = psutil.Process(pid)
        procs = [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return 0.0
    total = 0.0
    for p in procs:
        try:
            t = p.cpu_times()
        except psutil.NoSuchProcess:  # ended in between: its parent's children_* has it
            continue
        total += t.system + t.children_system
        if not system_only:
            total += t.user + t.children_user
    return total


@dataclass
class Cost:
    kind: str
    fires: int
    rate: float  # fires per second, 90 % to 10 % of the backlog
    seconds: float  # first fall to empty
    worker_us: float  # all workers' CPU per fire
    redis_us: float
    worker_sys_us: float = 0.0  # of worker_us, in the kernel
    calls: float = 0.0  # script calls per fire
    #: per command, server µs and calls per fire (INFO commandstats)
    commands: dict[str, tuple[float, float]] = field(default_factory=dict)
    #: with ``threads``: per thread name (slot threads as one), µs per fire of all workers
    threads: dict[str, float] = field(default_factory=dict)


def thread_ns(pid: int) -> dict[int, int]:
    """Run time (ns) of each thread of ``pid`` so far (``/proc/PID/task/TID/schedstat``)."""
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                out[int(tid)] = int(f.read().split()[0])
        except (FileNotFoundError, ProcessLookupError):  # ended in between
            continue
    return out


def thread_names(pid: int) -> dict[int, str]:
    """Thread id -> Python thread name of ``pid`` (``py-spy dump``), numbered slot threads
    as one (``cronsvc-run-N``)."""
    spy = shutil.which("py-spy", path=str(Path(sys.executable).parent)) or shutil.which("py-spy")
    if spy is None:
        sys.exit("--threads needs py-spy: `pip install -e '.[dev]'` (it is in the dev extra)")
    dump = subprocess.run([spy, "dump", "--pid", str(pid)], capture_output=True, text=True,
                          timeout=60).stdout
    names = {}
    for line in dump.splitlines():
        found = re.match(r'Thread (\d+) \(\w+\): "([^"]+)"', line)
        if found:
            names[int(found.group(1))] = re.sub(r"-\d+$", "-N", found.group(2))
    return names


def by_thread(pids: Sequence[int], before: dict[int, dict[int, int]], fires: int
              ) -> dict[str, float]:
    """µs per fire of each thread name of ``pids`` since ``before`` (:func:`thread_ns`)."""
    used: Counter[str] = Counter()
    for pid in pids:
        names, after = thread_names(pid), thread_ns(pid)
        for tid, ns in after.items():
            used[names.get(tid, "other")] += (ns - before[pid].get(tid, 0)) / 1000 / fires
    return dict(used.most_common())


@contextmanager
def profiling(pid: int, name: str | None) -> Iterator[None]:
    """py-spy sampling ``pid`` meanwhile, into bench/profiles/NAME.svg and NAME.txt."""
    if name is None:
        yield
        return
    spy = shutil.which("py-spy", path=str(Path(sys.executable).parent)) or shutil.which("py-spy")
    if spy is None:
        sys.exit("--profile needs py-spy: `pip install -e '.[dev]'` (it is in the dev extra)")
    PROFILES.mkdir(exist_ok=True)
    # --gil: only the thread holding the GIL is sampled, so the samples are where the
    # interpreter spends its CPU, not where threads wait.
    procs = [subprocess.Popen([spy, "record", "--nonblocking", "--gil", "--rate", "500",
                               "--threads", "--pid", str(pid), "--format", fmt, "-o",
                               str(PROFILES / f"{name}.{ext}")],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
             for fmt, ext in (("flamegraph", "svg"), ("raw", "txt"))]
    time.sleep(1.0)  # attached
    try:
        yield
    finally:
        for p in procs:
            p.send_signal(signal.SIGINT)
        for p in procs:
            p.wait(60)


def whole(fires: int) -> int:
    """``fires`` made a whole number of fires per job (at least one): what
    :func:`bench.claim.prepare` plans of it, and so what a drain divides by."""
    return max(fires // JOBS, 1) * JOBS


def drain(kind: str, fires: int, profile: str | None = None, code: str | None = None,
          threads: bool = False) -> Cost:
    """``fires`` due fires of ``JOBS`` jobs of ``kind``, drained by the workers (running the
    cronsvc found in ``code``, a copy of another version of the repository, if given);
    ``threads``: their CPU by thread too."""
    spec, _ = KINDS[kind]
    fires = whole(fires)
    with ExitStack() as stack:
        if kind == "http":
            url, sink = stack.enter_context(http_sink.running())
            spec = {"http": {"url": url}}
        cost = _drain(kind, spec, fires, profile, code, threads)
        if kind == "http":
            answered = http_sink.answered(sink)
            assert answered == fires, f"the sink answered {answered} of {fires} requests"
    return cost


def _drain(kind: str, spec: dict[str, Any], fires: int, profile: str | None,
           code: str | None, threads: bool) -> Cost:
    job = {"cron": "0 0 1 1 *", "catch_up": "all", **spec}
    jobs = {f"job{i:05d}": job for i in range(JOBS)}
    with common.redis_server() as (server, r):
        prepare(r, Scripts(r), fires, JOBS, common.server_ms(r) - DAY_MS)
        r.rename(K.queue, STAGED)
        worker = {"history": fires // JOBS + 10, "async_concurrency": CONCURRENCY}
        with common.fleet(server.url, jobs, code, worker=worker) as f:
            for i in range(WORKERS):
                f.worker(f"worker-{i}", "--concurrency", str(CONCURRENCY))
            common.wait_workers(r, WORKERS)
            wait_for(lambda: any(r.scan_iter(match=K.held("*"))), 60,
                     message="the workers' definitions")
            pids = [p.pid for p in f.procs.values()]
            redis_pid = common.server_pid(server)
            with profiling(pids[0], profile):
                per_thread = {p: thread_ns(p) for p in pids} if threads else {}
                before = [tree_cpu(p) for p in (*pids, redis_pid)]
                sys0 = sum(tree_cpu(p, True) for p in pids)
                calls0, stats0 = script_calls(r), command_usec(r)
                r.rename(STAGED, K.queue)
                r.publish(K.wakeup, "bench")
                rate, seconds = drained(r, fires)
                after = [tree_cpu(p) for p in (*pids, redis_pid)]
                sys1 = sum(tree_cpu(p, True) for p in pids)
                calls = script_calls(r) - calls0
                stats = {c: (u - stats0.get(c, (0, 0))[0], n - stats0.get(c, (0, 0))[1])
                         for c, (u, n) in command_usec(r).items()}
                split = by_thread(pids, per_thread, fires) if threads else {}
            left = r.zcard(K.queue) + r.zcard(K.working)
        assert left == 0, f"{left} fires left"
    used = [(a - b) / fires * 1e6 for a, b in zip(after, before, strict=True)]
    return Cost(kind, fires, rate, seconds, sum(used[:-1]), used[-1],
                (sys1 - sys0) / fires * 1e6, calls / fires,
                {c: (u / fires, n / fires) for c, (u, n) in stats.items() if n}, split)


def command_usec(r: redis.Redis) -> dict[str, tuple[int, int]]:
    """Per command the µs the server spent in it so far and its calls (INFO commandstats;
    the commands a script runs count under their own names, and in its EVALSHA too)."""
    return {name.removeprefix("cmdstat_"): (int(v["usec"]), int(v["calls"]))
            for name, v in r.info("commandstats").items()}


def script_calls(r: redis.Redis) -> int:
    """Script calls the server ran so far (INFO commandstats: EVALSHA and EVAL)."""
    stats = r.info("commandstats")
    return sum(int(stats.get(f"cmdstat_{c}", {}).get("calls", 0)) for c in ("evalsha", "eval"))


def compare_threads(code: str | None, fires: int, rounds: int) -> Section:
    """The no-op ``call`` drain's worker CPU by thread: this tree's, or the code in
    ``code`` and this tree's interleaved, ``rounds`` each."""
    section = Section("Worker CPU of a no-op `call` fire, by thread"
                      + (f", {code} against this tree" if code else ""))
    load = os.getloadavg()
    runs: dict[str, list[Cost]] = {"before": [], "after": []} if code else {"now": []}
    for _ in range(rounds):
        for name in runs:
            runs[name].append(drain("call", fires, code=code if name == "before" else None,
                                    threads=True))
    for name, costs in runs.items():
        names = sorted({t for c in costs for t in c.threads},
                       key=lambda t: -statistics.median(c.threads.get(t, 0.0) for c in costs))
        shown = [(t, statistics.median(c.threads.get(t, 0.0) for c in costs)) for t in names]
        section.figures.append(Figure(
            f"{name}: worker CPU per fire by thread (both workers, medians)",
            ", ".join(f"{t} {us:.1f} µs" for t, us in shown if us >= 0.05),
            reference="whole processes: " + ", ".join(f"{c.worker_us:.1f} µs" for c in costs)))
    section.notes.append(
        f"{rounds} drains of {fires:,} fires each per version; load average at the start "
        f"{', '.join(f'{x:.2f}' for x in load)}, at the end "
        f"{', '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return section


def compare(code: str, kind: str, fires: int, rounds: int, profile: str = "") -> Section:
    """Drains by the code in ``code`` and by this tree, interleaved, ``rounds`` each: the
    same machine state weighs on both alike. ``profile``: each version's first no-op
    ``call`` drain is sampled into ``profile``-before and ``profile``-after."""
    section = Section(f"Cost of a fire, {code} against this tree ({kind})")
    load = os.getloadavg()
    runs: dict[str, list[Cost]] = {"before": [], "after": []}
    fires = whole(int(fires * KINDS[kind][1]))
    for i in range(rounds):
        for name, where in (("before", code), ("after", None)):
            sampled = f"{profile}-{name}" if profile and kind == "call" and i == 0 else None
            runs[name].append(drain(kind, fires, sampled, code=where))
    # Each version's fires over its own scripts' ceiling: a faster claim script raises
    # the bar its drain is judged by.
    tops = {"before": script_cost_of(code, fires, False)[0], "after": claim_ceiling(fires)}
    for name, costs in runs.items():
        worker = statistics.median(c.worker_us for c in costs)
        server = statistics.median(c.redis_us for c in costs)
        rate = statistics.median(c.rate for c in costs)
        top = tops[name]
        section.figures.append(Figure(
            f"{name}: worker CPU per fire, redis-server CPU per fire, rate",
            f"{worker:.1f} µs, {server:.1f} µs, {common.rate(rate)} fires/s",
            reference=f"{rate / top:.2f} of the claim ceiling ({common.rate(top)} fires/s); "
                      "runs: " + "; ".join(f"{c.worker_us:.0f}/{c.redis_us:.0f} µs "
                                           f"{common.rate(c.rate)}/s" for c in costs)))
    section.notes.append(
        f"{rounds} drains of {fires:,} fires each, medians; load average at the start "
        f"{', '.join(f'{x:.2f}' for x in load)}, at the end "
        f"{', '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return section


def compare_lag(code: str, seconds: float, rounds: int) -> Section:
    """Loaded lag (bench/lag.py: 1,000 `call` jobs every second) by the code in ``code``
    and by this tree, interleaved."""
    from bench.lag import fleet_lag, loaded_jobs

    section = Section(f"Loaded lag, {code} against this tree")
    load = os.getloadavg()
    runs: dict[str, list[tuple[float, float, float]]] = {"before": [], "after": []}
    for _ in range(rounds):
        for name, where in (("before", code), ("after", None)):
            run = fleet_lag(loaded_jobs(), seconds, code=where)
            assert run.clean, run.problems
            runs[name].append(common.lag_summary(run.lags["call"]))
    for name, lags in runs.items():
        section.figures.append(Figure(
            f"{name}: loaded lag p99, 1,000 `call` jobs every second",
            " / ".join(f"{p99:.0f} ms" for _, p99, _ in lags), "< 50 ms",
            "p50: " + " / ".join(f"{p50:.0f} ms" for p50, _, _ in lags),
            max(p99 for _, p99, _ in lags) < 50))
    section.notes.append(f"{rounds} windows of {seconds:.0f} s each, interleaved; load "
                         f"average at the start {', '.join(f'{x:.2f}' for x in load)}, at "
                         f"the end {', '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return section


def compare_idle(code: str, seconds: float, rounds: int) -> Section:
    """Idle lag (bench/lag.py: 10 `call`, 10 async `call`, 10 `command` jobs every second)
    by the code in ``code`` and by this tree, interleaved, with APScheduler's each round."""
    from bench.lag import apscheduler_lag, fleet_lag, idle_jobs

    section = Section(f"Idle lag, {code} against this tree")
    load = os.getloadavg()
    runs: dict[str, dict[str, list[tuple[float, float, float]]]] = {
        "before": {}, "after": {}, "APScheduler": {}}
    for _ in range(rounds):
        for name, where in (("before", code), ("after", None)):
            run = fleet_lag(idle_jobs(), seconds, code=where)
            assert run.clean, run.problems
            for kind, lags in run.lags.items():
                runs[name].setdefault(kind, []).append(common.lag_summary(lags))
        for kind, lags in apscheduler_lag({"call": 10, "cmd": 10}, seconds, threads=20).items():
            runs["APScheduler"].setdefault(kind, []).append(common.lag_summary(lags))
    for name, kinds in runs.items():
        for kind in ("cmd", "call", "async"):
            if kind not in kinds:
                continue
            section.figures.append(Figure(
                f"{name}: idle lag p99, `{kind}` jobs",
                " / ".join(f"{p99:.0f} ms" for _, p99, _ in kinds[kind]), "< 10 ms",
                "p50: " + " / ".join(f"{p50:.0f} ms" for p50, _, _ in kinds[kind]),
                max(p99 for _, p99, _ in kinds[kind]) < 10))
    section.notes.append(f"{rounds} windows of {seconds:.0f} s each, interleaved; load "
                         f"average at the start {', '.join(f'{x:.2f}' for x in load)}, at "
                         f"the end {', '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return section


def compare_burst(code: str, n: int, rounds: int) -> Section:
    """The burst of bench/schedules.py (``n`` schedules due in one second, 2 workers) by
    the code in ``code`` and by this tree, interleaved."""
    from bench.schedules import drain as burst

    section = Section(f"Burst of {n:,} schedules, {code} against this tree")
    load = os.getloadavg()
    for _ in range(rounds):
        for name, where in (("before", code), ("after", None)):
            with common.redis_server() as (server, r):
                part = Section(name)
                # 5,000 upserts/s: slower than any upsert measured, so they end in time
                seconds = burst(part, server, r, n, 5_000.0, where)
            figure = part.figures[0]
            figure.name = f"{name}: {figure.name}"
            figure.value = f"{seconds:.1f} s; " + figure.value
            section.figures.append(figure)
    section.notes.append(f"interleaved; load average at the start "
                         f"{', '.join(f'{x:.2f}' for x in load)}, at the end "
                         f"{', '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return section


def drained(r: redis.Redis, fires: int) -> tuple[float, float]:
    def left() -> int:
        pipe = r.pipeline(transaction=False)
        pipe.zcard(K.queue)
        pipe.zcard(K.working)
        return int(sum(pipe.execute()))

    return common.drained(left, fires, 600)


def dispatched(kind: str, fires: int) -> Cost:
    """A dispatch kind's drain into a queue no consumer reads (``bench/dispatch.py``), in
    the virtualenv its library needs (arq's: ``make install-arq``)."""
    from bench import dispatch
    from bench.dispatch_targets import TARGETS as QUEUES

    python = QUEUES[kind].python
    if python is not None and Path(sys.executable) != python:
        if not python.exists():
            raise RuntimeError(f"{python} is missing: `make install-arq` builds it")
        out = subprocess.run([str(python), "-m", "bench.cost", "--dispatched", kind,
                              "--fires", str(fires)], cwd=Path(__file__).resolve().parent.parent,
                             check=True, capture_output=True, text=True).stdout
        fields = json.loads(out.splitlines()[-1])
        return Cost(**fields)

    with dispatch.servers() as (server, r, broker, _):
        d = dispatch.fleet_drain(QUEUES[kind], r, server.url, broker.url,
                                 common.server_pid(broker), common.server_pid(server), fires,
                                 dispatch.NO_CONSUMER, False)
    return Cost(kind, fires, d.rate, 0.0, d.workers_us, d.redis_us)


def claim_ceiling(fires: int) -> float:
    """The claim script's ceiling on ``fires`` fires of ``JOBS`` jobs, batches of 100."""
    return script_cost(fires)[0]


@contextmanager
def prepared(fires: int, lua: Path | None = None
             ) -> Iterator[tuple[redis.Redis, Scripts, list[str], int]]:
    """A redis-server of its own with ``fires`` fires of ``JOBS`` jobs queued, due, and the
    claim and ack scripts of ``lua`` (default: this tree's) loaded: the client, its
    scripts, the fires queued and the server's pid."""
    with common.redis_server() as (server, r):
        s = Scripts(r)
        if lua is not None:
            s.sources = load_sources(lua)
            s._scripts = {n: r.register_script(src.text) for n, src in s.sources.items()}
        prepare(r, s, fires, JOBS, common.server_ms(r) - DAY_MS)
        queued = [str(fid) for fid in r.zrange(K.queue, 0, -1)]
        for name in ("claim", "ack"):
            r.script_load(s.sources[name].text)
        yield r, s, queued, common.server_pid(server)


def script_cost(fires: int, lua: Path | None = None, with_ack: bool = False
                ) -> tuple[float, float]:
    """The ceiling of the claim script (and the ack script, ``with_ack``) of the ``lua``
    directory (default: this tree's) on ``fires`` fires of ``JOBS`` jobs, batches of 100:
    fires per second, and redis-server CPU µs per fire meanwhile."""
    with prepared(fires, lua) as (r, s, queued, pid):
        before = tree_cpu(pid)
        rate = ceiling(r, s, queued, CONCURRENCY, with_ack)
        return rate, (tree_cpu(pid) - before) / fires * 1e6


def commands_cost(fires: int) -> float:
    """redis-server CPU µs per fire of the writes of claim + ack sent as plain pipelined
    commands, no Lua (:func:`bench.claim.plain_commands`), on the fires
    :func:`script_cost` takes."""
    with prepared(fires) as (r, _, queued, pid):
        before = tree_cpu(pid)
        plain_commands(r, queued, CONCURRENCY)
        return (tree_cpu(pid) - before) / fires * 1e6


def primitives_cost(fires: int) -> float:
    """This process's CPU µs per fire of a worker's own steps for a no-op call without its
    threads (:func:`bench.claim.primitives`), on the fires :func:`script_cost` takes."""
    with prepared(fires) as (_, s, _queued, _pid):
        t0 = time.process_time()
        primitives(s, CONCURRENCY, fires)
        return (time.process_time() - t0) / fires * 1e6


#: :func:`script_cost` for a version older than this module, with its own bench/claim.py
OWN_CEILING = """
import json, psutil
from bench import common
from bench.claim import ceiling, prepare
from bench.common import K
from cronsvc.store.scripts import Scripts
def cpu(pid):
    t = psutil.Process(pid).cpu_times()
    return t.user + t.system
with common.redis_server() as (server, r):
    s = Scripts(r)
    prepare(r, s, {fires}, {jobs}, common.server_ms(r) - {day})
    queued = [str(f) for f in r.zrange(K.queue, 0, -1)]
    for name in ("claim", "ack"):
        r.script_load(s.sources[name].text)
    pid = common.server_pid(server)
    before = cpu(pid)
    rate = ceiling(r, s, queued, {batch}, {with_ack})
    print(json.dumps([rate, (cpu(pid) - before) / {fires} * 1e6]))
"""


def script_cost_of(code: str, fires: int, with_ack: bool) -> tuple[float, float]:
    """:func:`script_cost` of the version in ``code``, run by its own code: the arguments
    a version passes its scripts are its own (a script's layout may change between them)."""
    run = ("import json, sys; from bench.cost import script_cost; "
           f"print(json.dumps(script_cost({int(fires)}, None, {with_ack!r})))")
    if not (Path(code) / "bench" / "cost.py").exists():  # older than this module
        run = OWN_CEILING.format(fires=int(fires), jobs=JOBS, day=DAY_MS,
                                 batch=CONCURRENCY, with_ack=with_ack)
    out = subprocess.run([sys.executable, "-c", run], cwd=code, check=True, text=True,
                         capture_output=True, env={**os.environ, "PYTHONPATH": code}).stdout
    rate, us = json.loads(out.splitlines()[-1])
    return float(rate), float(us)


def compare_scripts(code: str, fires: int, rounds: int) -> Section:
    """The claim and claim + ack ceilings of the version in ``code`` and of this tree,
    interleaved, ``rounds`` each."""
    section = Section(f"Script cost, {code} against this tree")
    for with_ack in (False, True):
        runs: dict[str, list[tuple[float, float]]] = {"before": [], "after": []}
        for _ in range(rounds):
            runs["before"].append(script_cost_of(code, fires, with_ack))
            runs["after"].append(script_cost(fires, None, with_ack))
        for name, costs in runs.items():
            section.figures.append(Figure(
                f"{name}: {'claim + ack' if with_ack else 'claim'} ceiling, redis-server CPU "
                "per fire", f"{common.rate(statistics.median(c[0] for c in costs))} fires/s, "
                f"{statistics.median(c[1] for c in costs):.1f} µs",
                reference="runs: " + "; ".join(f"{common.rate(a)}/s {b:.1f} µs"
                                               for a, b in costs)))
    return section


def measure(fires: int = 50_000, kinds: str = "call,async,command,http,celery,rq,dramatiq,arq",
            profile: str = "") -> Section:
    section = Section("Cost of a fire (CPU time per fire, 2 worker processes)")
    load = os.getloadavg()
    costs = []
    for kind in kinds.split(","):
        if kind in DISPATCH:
            costs.append(dispatched(kind, max(fires // 10, 2_000)))
        else:
            n = whole(int(fires * KINDS[kind][1]))
            costs.append(drain(kind, n, profile or None if kind == "call" else None))
    ceiling_rate = claim_ceiling(fires)
    # References of the two CPU targets, measured in this run: what the worker's own steps
    # and the bare writes cost on this machine now (the drains' cost swings with it).
    # (Each the median of three: a ceiling's run is short, its CPU time a few ticks.)
    refs = (tuple(statistics.median(cost() for _ in range(3)) for cost in (
        lambda: primitives_cost(fires), lambda: script_cost(fires, None, True)[1],
        lambda: commands_cost(fires))) if any(c.kind == "call" for c in costs) else None)
    for c in costs:
        target = TARGETS.get(c.kind)
        ratio = c.rate / ceiling_rate
        name = {"async": "async `call`", "command": "`command` (true)",
                "http": "`http` (a GET answered 204)"}.get(
            c.kind, f"`{c.kind}`" if c.kind in DISPATCH else "no-op `call`")
        kernel = f", {c.worker_sys_us:.1f} of them in the kernel" if c.worker_sys_us else ""
        section.figures.append(Figure(
            f"worker CPU per fire, {name}", f"{c.worker_us:.1f} µs{kernel}",
            f"<= {target:.0f} µs" if target else "-",
            f"{common.rate(c.rate)} fires/s, {ratio:.2f} of the claim ceiling "
            f"({common.rate(ceiling_rate)} fires/s); {c.fires:,} fires",
            None if target is None else c.worker_us <= target))
        if c.kind == "call":
            assert refs is not None  # measured whenever a no-op call drain is
            section.notes.append(
                f"reference of the worker's figure, same run: the worker's own steps for a "
                f"no-op call in one thread, no slot, lease, log line nor metric "
                f"(bench/claim.py's primitives: the claim read, the call, its outcome, "
                f"record and place in the ack, one ack a claim of 100) {refs[0]:.1f} µs of "
                f"its CPU per fire (median of three)")
            section.notes.append(
                f"references of the redis-server figure, same run: the scripts' pipelined "
                f"ceiling (claim + ack calls of 100 fires, no worker beside) {refs[1]:.1f} "
                f"µs per fire; the same writes sent as plain pipelined commands, no Lua "
                f"(bench/claim.py's plain_commands) {refs[2]:.1f} µs (medians of three)")
            section.figures.append(Figure(
                "redis-server CPU per fire, claim + ack", f"{c.redis_us:.1f} µs",
                f"<= {REDIS_TARGET:.0f} µs",
                f"drained in {c.seconds:.1f} s; {c.calls:.3f} script calls per fire",
                c.redis_us <= REDIS_TARGET))
            section.figures.append(Figure(
                "no-op `call` drain over the claim ceiling", f"{ratio:.2f}",
                f">= {RATIO_TARGET}", f"{common.rate(c.rate)} fires/s; ceiling "
                f"{common.rate(ceiling_rate)} fires/s", ratio >= RATIO_TARGET))
            busiest = sorted(c.commands.items(), key=lambda kv: -kv[1][0])[:8]
            section.notes.append(
                "no-op `call`, redis-server time per fire by command (INFO commandstats; "
                "evalsha includes the commands its scripts run): " + ", ".join(
                    f"{name} {us:.2f} µs ({n:.2f} calls)" for name, (us, n) in busiest))
        else:
            section.notes.append(f"{name}: redis-server {c.redis_us:.1f} µs per fire"
                                 + (f", {c.calls:.3f} script calls per fire" if c.calls else ""))
    section.notes.append(
        f"load average at the start {', '.join(f'{x:.2f}' for x in load)}, at the end "
        f"{', '.join(f'{x:.2f}' for x in os.getloadavg())}; worker CPU is each worker's "
        "process tree (psutil, children reaped included), summed over the workers")
    return section


#: frames every sample of a thread passes through (its start, the CLI, the loops that wait
#: for work): left out of the inclusive counts, which they would top
FRAMING = ("(threading.py", "(click/core.py", "(<frozen runpy>", "(cronsvc/__main__.py",
           "(cronsvc/cli/main.py", "(cronsvc/cli/options.py", "Slots._serve ",
           "Worker.run_forever ", "Worker._loop ", "Results.record_all ",
           "Results._record_batch ")


def top_costs(name: str, count: int = 15) -> tuple[list[tuple[str, float]], ...]:
    """Where the samples of profile ``name`` (collapsed stacks) went, as shares of all:
    by function, itself or below it (a function called from several places counts once
    per sample), and by the frame the sample was in (self time)."""
    inclusive: Counter[str] = Counter()
    leaf: Counter[str] = Counter()
    total = 0
    for line in (PROFILES / f"{name}.txt").read_text().splitlines():
        stack, _, n = line.rpartition(" ")
        frames = stack.split(";")[1:]  # the first names the thread
        total += int(n)
        if frames:
            leaf[frames[-1]] += int(n)
        for frame in {f.partition(":")[0] for f in frames}:
            if frame.startswith(FRAMING) or frame.endswith(FRAMING):
                continue
            inclusive[frame] += int(n)
    return tuple([(frame, n / total) for frame, n in c.most_common(count)]
                 for c in (inclusive, leaf))


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--fires", type=int, default=50_000)
    ap.add_argument("--kinds", default="call,async,command,http,celery,rq,dramatiq,arq")
    ap.add_argument("--profile", default="", help="py-spy the no-op call drain into NAME "
                    "(with --compare: each version's first, into NAME-before, NAME-after)")
    ap.add_argument("--top", default="", help="print the top costs of profile NAME")
    ap.add_argument("--compare", default="", metavar="DIR",
                    help="drains by the cronsvc of DIR (another version's copy) and by this "
                         "tree, interleaved")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--lag", type=float, default=0.0, metavar="SECONDS",
                    help="with --compare: loaded lag windows of SECONDS")
    ap.add_argument("--idle", type=float, default=0.0, metavar="SECONDS",
                    help="with --compare: idle lag windows of SECONDS")
    ap.add_argument("--burst", type=int, default=0, metavar="N",
                    help="with --compare: bursts of N schedules")
    ap.add_argument("--threads", action="store_true",
                    help="the no-op call drain's worker CPU by thread (with --compare: "
                         "both versions)")
    ap.add_argument("--dispatched", default="", metavar="KIND",
                    help="one dispatch kind's drain of --fires fires, as a line of JSON "
                         "(what a run in another virtualenv hands back)")
    opts = ap.parse_args(argv)
    if opts.dispatched:
        print(json.dumps(dataclasses.asdict(dispatched(opts.dispatched, opts.fires))))
        return
    if opts.threads:
        compare_threads(opts.compare or None, opts.fires, opts.rounds).print()
        return
    if opts.compare and (opts.lag or opts.idle or opts.burst):
        if opts.lag:
            compare_lag(opts.compare, opts.lag, opts.rounds).print()
        if opts.idle:
            compare_idle(opts.compare, opts.idle, opts.rounds).print()
        if opts.burst:
            compare_burst(opts.compare, opts.burst, opts.rounds).print()
        return
    if opts.compare:
        compare_scripts(opts.compare, opts.fires, opts.rounds).print()
        for kind in filter(None, opts.kinds.split(",")):
            compare(opts.compare, kind, opts.fires, opts.rounds, opts.profile).print()
        return
    if opts.top:
        for title, rows in zip(("itself or below", "itself"), top_costs(opts.top),
                               strict=True):
            print(f"{opts.top}: samples in a function, {title}")
            for frame, share in rows:
                print(f"{share:6.1%}  {frame}")
        return
    measure(opts.fires, opts.kinds, opts.profile).print()


if __name__ == "__main__":
    main()
