"""Idle cost: what 8 idle workers and 1 planner (default settings) cost Redis and
the host while nothing is due.

Counted over the window: INFO commandstats (every command the server ran,
those a script runs included) and, from MONITOR, the requests each process
sends with the commands its scripts run on its behalf; CPU of every process
from psutil.

Reference: the request rate a worker's constants imply (one claim every
MAX_SLEEP, a presence pipeline of 2 commands every PRESENCE_EVERY).

Run: ``.venv/bin/python -m bench.idle [--seconds 60]``
"""

from __future__ import annotations

import collections
import time

import psutil
import redis

from bench import common
from bench.common import Figure, K, Section
from cronsvc.presence import PRESENCE_EVERY
from cronsvc.testing import wait_for
from cronsvc.worker.worker import MAX_SLEEP

WORKERS = 8
TARGET = 2.0  # commands per second per process
BENCH_COMMANDS = tuple(f"cmdstat_{c}" for c in ("config", "info", "monitor", "hello", "client"))


def client_ports(pids: dict[str, int], redis_port: int) -> dict[str, str]:
    """Local port of every connection to Redis -> the name of the process that holds it."""
    out = {}
    for name, pid in pids.items():
        for conn in psutil.Process(pid).net_connections(kind="tcp"):
            if conn.raddr and conn.raddr.port == redis_port:
                out[str(conn.laddr.port)] = name
    return out


def monitor(url: str, seconds: float) -> list[tuple[str, str]]:
    """(client port or 'lua', command) of every command the server runs for ``seconds``."""
    seen: list[tuple[str, str]] = []
    client = redis.Redis.from_url(url)
    end = time.monotonic() + seconds
    with client.monitor() as m:
        while time.monotonic() < end:
            cmd = m.next_command()
            seen.append((cmd["client_port"] or cmd["client_type"], cmd["command"].split(" ")[0]))
    client.close()
    return seen


def attribute(seen: list[tuple[str, str]], ports: dict[str, str]) -> dict[str, list[int]]:
    """Per process: [requests sent, commands its scripts ran]."""
    counts: dict[str, list[int]] = collections.defaultdict(lambda: [0, 0])
    last = ""
    for port, _command in seen:
        if port == "lua":
            counts[last][1] += 1
            continue
        last = ports.get(port, "other")
        counts[last][0] += 1
    return counts


def measure(seconds: float = 60.0) -> Section:
    section = Section(f"Idle cost ({WORKERS} idle workers + 1 planner, default settings)")
    jobs = {f"yearly-{i:02d}": common.noop_job("0 0 1 1 *") for i in range(20)}
    with common.redis_server() as (server, r), common.fleet(server.url, jobs) as f:
        f.start("planner", "planner")
        for i in range(WORKERS):
            f.worker(f"worker-{i}")
        common.wait_workers(r, WORKERS)
        wait_for(lambda: r.zcard(K.planners), 60, message="the planner's first tick")
        settle = time.monotonic() + 2 * PRESENCE_EVERY
        wait_for(lambda: time.monotonic() > settle, 3 * PRESENCE_EVERY,
                 message="start-up traffic to pass")
        pids = {name: p.pid for name, p in f.procs.items()}
        ports = client_ports(pids, server.port)
        cpu = common.CpuMeter(list(pids.values())).start()
        r.config_resetstat()
        seen = monitor(server.url, seconds)
        stats = r.info("commandstats")
        cpu.stop()
    calls = sum(int(v["calls"]) for k, v in stats.items() if k not in BENCH_COMMANDS)
    processes = WORKERS + 1
    per_process = calls / cpu.elapsed / processes
    by_process = attribute(seen, ports)
    workers = [by_process[f"worker-{i}"] for i in range(WORKERS)]
    sent = sum(w[0] for w in workers) / WORKERS / cpu.elapsed
    ran = sum(sum(w) for w in workers) / WORKERS / cpu.elapsed
    planner = by_process["planner"]
    expected = 1 / MAX_SLEEP + 2 / PRESENCE_EVERY
    section.figures.append(Figure(
        "Redis commands per second per process (INFO commandstats)",
        f"{per_process:.2f} ({calls:,} commands in {cpu.elapsed:.0f} s, {processes} processes)",
        f"<= {TARGET:g}", f"the worker's constants imply {expected:.1f} requests/s per worker",
        per_process <= TARGET))
    section.figures.append(Figure(
        "per worker, requests it sends (MONITOR)", f"{sent:.2f}/s; with the commands its "
        f"scripts run: {ran:.2f}/s", "-",
        f"planner: {planner[0] / cpu.elapsed:.2f} requests/s, "
        f"{sum(planner) / cpu.elapsed:.2f} with its scripts' commands"))
    *worker_cpu, planner_cpu = (cpu.per_process[list(pids).index(n)]
                                for n in [*(f"worker-{i}" for i in range(WORKERS)), "planner"])
    section.figures.append(Figure(
        "worker CPU", f"{sum(worker_cpu) / WORKERS:.2%} of one core per worker "
        f"(max {max(worker_cpu):.2%})", "-", f"planner {planner_cpu:.2%}"))
    top = sorted(((int(v["calls"]), k.removeprefix("cmdstat_")) for k, v in stats.items()
                  if k not in BENCH_COMMANDS), reverse=True)
    section.notes.append("commands: " + ", ".join(f"{name} {n}" for n, name in top))
    return section


if __name__ == "__main__":
    common.cli(__doc__, measure, seconds=60.0)
