"""A fleet of real planner and worker processes on a Redis of its own (AOF,
``appendfsync always``), and the faults a chaos scenario throws at it.

Every process incarnation gets a new name, so a ledger line names the very
process that ran it, and every fault is logged with its time, so the judge can
tell a rerun caused by a fault from one that was not.
"""

from __future__ import annotations

import collections
import json
import random
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import redis

from cronsvc.config import Job, load_config
from cronsvc.fires import parse_fire
from cronsvc.keys import Keys
from cronsvc.redis_server import RedisServer
from tests.chaos.ledger import Fault, Totals, judge
from tests.conftest import wait_for
from tests.e2e_jobs import read_ledger
from tests.fleet import Fleet

K = Keys()
LEASE = "1"  # seconds: a killed worker's fires run again about a second later
STARTING_DEADLINE = 2.0  # seconds, of the jobs with catch_up all
FAULTS = ("kill", "planner", "redis", "stop")


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def chaos_jobs(ledger: str) -> dict[str, Any]:
    """Every-second jobs with each catch-up rule, and a slow one that forbids overlap."""

    def job(cron: str, longest_ms: int = 300, **options: Any) -> dict[str, Any]:
        return {"cron": cron, "call": "tests.chaos.jobs:work",
                "kwargs": {"path": ledger, "longest_ms": longest_ms}, **options}

    jobs = {f"latest-{i}": job("* * * * * *") for i in range(3)}
    jobs |= {f"all-{i}": job("* * * * * *", catch_up="all",
                             starting_deadline=STARTING_DEADLINE) for i in range(2)}
    jobs["none-0"] = job("*/2 * * * * *", catch_up="none", starting_deadline=STARTING_DEADLINE)
    jobs["slow-0"] = job("*/3 * * * * *", longest_ms=2500, overlap="forbid", retries=1)
    return jobs


class LedgerTail:
    """Reads the ledger as it grows: starts so far, and the runs not finished yet."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = 0
        self.starts = 0
        self.open: dict[tuple[str, int], str] = {}  # (fire, attempt) -> worker

    def read(self) -> int:
        try:
            with open(self.path, "rb") as fh:
                fh.seek(self.offset)
                chunk = fh.read()
        except FileNotFoundError:
            return 0
        done = chunk.rfind(b"\n") + 1  # a line being written is read next time
        self.offset += done
        for line in chunk[:done].splitlines():
            e = json.loads(line)
            key = (e["fire"], e["attempt"])
            if e["event"] == "start":
                self.starts += 1
                self.open[key] = e["worker"]
            else:
                self.open.pop(key, None)
        return self.starts

    def running_on(self) -> list[str]:
        """Workers with a run in progress (as far as the ledger shows)."""
        self.read()
        return sorted(set(self.open.values()))


@dataclass(frozen=True)
class Scenario:
    name: str
    seconds: float
    faults: tuple[str, ...]
    planners: int = 2
    workers: int = 3


class ChaosRun:
    """One scenario: start the fleet, inject faults for a while, settle, judge."""

    def __init__(self, tmp: Path, server: RedisServer, scenario: Scenario, seed: int) -> None:
        self.tmp = tmp
        self.server = server
        self.scenario = scenario
        self.seed = seed
        self.rnd = random.Random(seed)
        self.r = redis.Redis.from_url(server.url, decode_responses=True)
        self.fleet = Fleet(tmp, server.url, {})
        self.fleet.write(chaos_jobs(self.fleet.ledger), planner={"horizon": 10},
                         worker={"history": 100_000})
        self.jobs: dict[str, Job] = load_config(self.fleet.config).jobs
        self.faults: list[Fault] = []
        self.workers: list[str] = []
        self.planners: list[str] = []
        self._names = 0
        self.tail = LedgerTail(Path(self.fleet.ledger))

    # -- processes ---------------------------------------------------------
    def _name(self, role: str) -> str:
        self._names += 1
        return f"{role}-{self._names}"

    def start_worker(self) -> None:
        name = self._name("worker")
        self.fleet.worker(name, "--lease", LEASE, "--concurrency", "4")
        self.workers.append(name)
        # Until it is claiming: a worker that finds Redis down at start exits (a supervisor
        # such as `cronsvc up` or systemd starts it again), and a fault injected before it
        # connected would leave the fleet short of a worker for the rest of the run.
        wait_for(lambda: self.r.zscore(K.workers, name) is not None, timeout=60,
                 message=f"{name} to start claiming")

    def start_planner(self) -> None:
        name = self._name("planner")
        self.fleet.planner(name)
        self.planners.append(name)

    def _kill(self, name: str, sig: int = signal.SIGKILL) -> int:
        at = now_ms()
        self.fleet.signal(name, sig)
        self.fleet.wait(name, timeout=60)
        return at

    def let_run(self, low: int, high: int) -> None:
        """Let the fleet start a random number of runs (low..high) on its own."""
        goal = self.tail.starts + self.rnd.randint(low, high)
        wait_for(lambda: self.tail.read() >= goal, timeout=60, interval=0.02,
                 message=f"{goal} runs to start")

    # -- faults ------------------------------------------------------------
    def kill_worker(self) -> None:
        """kill -9 of a worker in the middle of a run (if any runs), then a new one."""
        busy = [w for w in self.tail.running_on() if w in self.workers]
        name = self.rnd.choice(busy or self.workers)
        self.workers.remove(name)
        at = self._kill(name)
        self.faults.append(Fault("kill", name, at, at))
        self.let_run(0, 3)
        self.start_worker()

    def restart_planner(self) -> None:
        name = self.rnd.choice(self.planners)
        self.planners.remove(name)
        at = self._kill(name)
        self.let_run(1, 15)
        self.start_planner()
        self.faults.append(Fault("planner", name, at, now_ms()))

    def _scores(self, key: str, stop: int) -> list[int]:
        pairs: list[tuple[str, float]]
        pairs = self.r.zrange(key, 0, stop, withscores=True)  # type: ignore[assignment]
        return [int(score) for _, score in pairs]

    def restart_redis(self) -> None:
        """kill -9 of redis-server; restart it from its AOF once a lease it held has
        lapsed (or, holding none, once a queued fire has fallen due)."""
        held = self._scores(K.working, -1) or self._scores(K.queue, 0) or [now_ms()]
        until = self.rnd.choice(held) + self.rnd.randint(0, 500)
        down = now_ms()
        self.server.kill()
        wait_for(lambda: now_ms() >= until, timeout=30, interval=0.01,
                 message="the outage to outlast a lease")
        self.server.start()
        self.faults.append(Fault("redis", "redis", down, now_ms()))

    def stop_workers(self) -> None:
        """SIGTERM every worker; start new ones once a fire waited past the starting deadline."""
        at = now_ms()
        for name in self.workers:
            self.fleet.signal(name, signal.SIGTERM)
        for name in self.workers:
            self.fleet.wait(name, timeout=60)
        count, self.workers = len(self.workers), []
        late = int((STARTING_DEADLINE + 0.5) * 1000)
        wait_for(lambda: self.r.zcount(K.queue, "-inf", self.server_ms() - late), timeout=60,
                 message="a fire to wait past its starting deadline")
        for _ in range(count):
            self.start_worker()
        self.faults.append(Fault("stop", "workers", at, now_ms()))

    # -- the run -----------------------------------------------------------
    def server_ms(self) -> int:
        sec, usec = self.r.time()
        return int(sec) * 1000 + int(usec) // 1000

    def run(self) -> Totals:
        s = self.scenario
        for _ in range(s.planners):
            self.start_planner()
        for _ in range(s.workers):
            self.start_worker()
        wait_for(lambda: self.r.hlen(K.jobs) == len(self.jobs), timeout=60,
                 message="the planners to publish the jobs")
        start = self.server_ms()  # every fire after this is planned: published before
        self.let_run(1, 1)
        actions: dict[str, Callable[[], None]] = {
            "kill": self.kill_worker, "planner": self.restart_planner,
            "redis": self.restart_redis, "stop": self.stop_workers}
        # Each fault of the scenario once in a random order, then at random.
        todo = self.rnd.sample(s.faults, len(s.faults))
        end_at = time.monotonic() + s.seconds
        while time.monotonic() < end_at or todo:
            self.let_run(3, 15)
            actions[todo.pop() if todo else self.rnd.choice(s.faults)]()
        end = self.server_ms()
        self.settle(end)
        self.fleet.stop_all()
        (self.tmp / "faults.json").write_text(json.dumps([vars(f) for f in self.faults]))
        return self.judge(start, end)

    def settle(self, end: int, timeout: float = 120) -> None:
        """Wait until every fire due by ``end`` is planned, and none is queued or running."""

        def settled() -> bool:
            marks = self.r.hgetall(K.watermarks)
            if len(marks) < len(self.jobs) or min(int(v) for v in marks.values()) < end:
                return False
            pending = self.r.zrange(K.queue, 0, -1) + self.r.zrange(K.working, 0, -1)
            return all(parse_fire(str(fid))[1] > end for fid in pending)

        wait_for(settled, timeout=timeout, interval=0.1,
                 message=f"the fires due by {end} to be run or dropped")

    def judge(self, start: int, end: int) -> Totals:
        history = [json.loads(x) for job in self.jobs
                   for x in self.r.lrange(K.history(job), 0, -1)]
        events = [json.loads(x) for x in self.r.lrange(K.events, 0, -1)]
        return judge(self.jobs, start, end, read_ledger(self.fleet.ledger), history, events,
                     self.faults)

    def report(self, totals: Totals) -> str:
        counts = collections.Counter(f.kind for f in self.faults)
        kinds = ", ".join(f"{n} {kind}" for kind, n in sorted(counts.items()))
        return "\n".join([
            f"chaos scenario {self.scenario.name}: seed {self.seed}, "
            f"{self.scenario.seconds:.0f} s of faults ({kinds}); files in {self.tmp}",
            *(f"  {line}" for line in totals.lines()),
        ])

    def close(self) -> None:
        self.fleet.stop_all()
        self.r.close()
