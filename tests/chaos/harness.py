"""A fleet of real planner and worker processes on a Redis of its own (AOF,
``appendfsync always``), and the faults a chaos scenario throws at it.

Every process incarnation gets a new name, so a ledger line names the very
process that ran it, and every fault is logged with its time, so the judge can
tell a rerun caused by a fault from one that was not. Each publish of a job
file is logged too (an *epoch*), so the judge knows which definition was in
force when a run started. Under ``--reload`` (the reload scenario), each edit of the
jobs' code is logged as a fault that explains nothing: a swap may not rerun a fire.
"""

from __future__ import annotations

import collections
import json
import os
import random
import re
import signal
import socket
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import redis

from cronsvc.config.models import Config, load_config
from cronsvc.fires import is_fire_id, job_of, parse_fire, schedule_of
from cronsvc.keys import Keys
from cronsvc.process.redis_server import RedisServer
from cronsvc.store.replies import json_object
from cronsvc.testing import Fleet, read_ledger
from cronsvc.worker.leases import ridden_out
from tests.chaos.churn import Churn
from tests.chaos.dispatch import Consumers, Copies, count_copies, dispatch_jobs, sending_holder
from tests.chaos.files import LIMITS, STARTING_DEADLINE, VERSIONS, chaos_jobs
from tests.chaos.garbage import Planted, plant
from tests.chaos.ledger import Epoch, Fault, Totals, judge
from tests.chaos.reload import Code, CodeRuns, code_runs, refusals, reload_jobs, swaps, up_pids
from tests.support.wait import wait_for

K = Keys()
LEASE = "2"  # seconds: a killed worker's fires run again about two seconds later
# Taken off the Redis fault every run rides out (worker/leases.py:ridden_out) before a run
# restarted by a shorter one is a failure: room for a busy machine's late renewals.
SLACK_S = 0.5
FAULTS = ("kill", "planner", "redis", "stop", "oom", "readonly", "freeze", "deploy", "garbage")


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def pid_alive(pid: int) -> bool:
    """Whether ``pid`` is a live process (a zombie waiting for its reaper is not)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False


class LedgerTail:
    """Reads the ledger as it grows: starts so far, and the runs not finished yet."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = 0
        self.starts = 0
        self.open: dict[tuple[str, int], dict[str, Any]] = {}  # (fire, attempt) -> start line

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
                self.open[key] = e
            else:
                self.open.pop(key, None)
        return self.starts

    def running_on(self, kind: str | None = None) -> list[str]:
        """Workers with a run (of ``kind``: call or command) in progress, as far as the
        ledger shows."""
        self.read()
        return sorted({e["worker"] for e in self.open.values()
                       if kind is None or e.get("kind") == kind})

    def command_pids(self, worker: str) -> list[int]:
        """Processes doing the work of command runs of ``worker`` not finished yet."""
        self.read()
        return [e["pid"] for e in self.open.values()
                if e["worker"] == worker and e.get("kind") == "command"]


@dataclass(frozen=True)
class Scenario:
    name: str
    seconds: float
    faults: tuple[str, ...]
    planners: int = 2
    workers: int = 3
    churn: bool = False  # runtime schedules created, changed and deleted throughout
    limits: bool = False  # jobs sharing a named limit, whose workers are killed mid-run
    lease: str = LEASE  # the workers' lease, seconds
    # `celery:` jobs run by Celery workers on a broker of their own (the run's ``broker``)
    dispatch: bool = False
    # workers run with --reload, the module of their jobs rewritten (faults swap, broken)
    reload: bool = False


class ChaosRun:
    """One scenario: start the fleet, inject faults for a while, settle, judge."""

    def __init__(self, tmp: Path, server: RedisServer, scenario: Scenario, seed: int,
                 broker: RedisServer | None = None) -> None:
        self.tmp = tmp
        self.server = server
        self.scenario = scenario
        self.seed = seed
        self.rnd = random.Random(seed)
        # Garbage may hold bytes that are not UTF-8: read, as the fleet does, without failing.
        self.r = redis.Redis.from_url(server.url, decode_responses=True,
                                      encoding_errors="replace")
        # Reload: the jobs' module in a folder of the run's, on the processes' import path.
        self.code = Code(tmp / "code") if scenario.reload else None
        self.fleet = Fleet(tmp, server.url, {},
                           pythonpath=[self.code.folder] if self.code is not None else [])
        self.paths: dict[str, Path] = {}
        self.files: dict[str, Config] = {}
        assert scenario.dispatch == (broker is not None), "a broker for dispatch, only"
        # Dispatch: one job file of `celery:` jobs, consumed by Celery workers on ``broker``.
        self.consumers = (Consumers(tmp, broker, server.url, self.fleet.ledger)
                          if broker is not None else None)
        self.copies: Copies | None = None
        self.code_runs: CodeRuns | None = None
        self.kills: dict[str, list[int]] = {}  # supervisor -> when a worker of its was killed
        if self.code is not None:
            self.code.folder.mkdir()
            self.code.write_next()
        one = broker is not None or self.code is not None  # one job file, never deployed
        for version in VERSIONS[:1] if one else VERSIONS:
            jobs = (dispatch_jobs(broker.url) if broker is not None
                    else reload_jobs(self.fleet.ledger) if self.code is not None
                    else chaos_jobs(self.fleet.ledger, version, scenario.limits))
            self.fleet.write(jobs,
                             planner={"horizon": 10}, worker={"history": 100_000},
                             **({"limits": LIMITS} if scenario.limits else {}))
            self.paths[version] = tmp / f"schedules-{version}.yaml"
            os.replace(self.fleet.config, self.paths[version])
            self.files[version] = load_config(self.paths[version])
        self.version = "v1"  # the file new processes start on
        self.epochs: list[Epoch] = []
        self.faults: list[Fault] = []
        self.events: list[dict[str, Any]] = []  # Redis's decisions, newest first, once judged
        self.orphans: list[str] = []
        self.planted: list[Planted] = []
        self.exited: list[str] = []  # processes that ended without being stopped
        self.workers: list[str] = []
        self.planners: list[str] = []
        self.running: dict[str, str] = {}  # process -> the version of its file
        self._names = 0
        self.tail = LedgerTail(Path(self.fleet.ledger))
        self.churn = Churn(server.url, seed) if scenario.churn else None

    # -- processes ---------------------------------------------------------
    def _name(self, role: str) -> str:
        self._names += 1
        return f"{role}-{self._names}"

    def _file(self, version: str | None) -> tuple[str, str]:
        version = version or self.version
        return version, str(self.paths[version])

    def start_worker(self, version: str | None = None) -> None:
        name = self._name("worker")
        version, path = self._file(version)
        self.fleet.worker(name, "--lease", self.scenario.lease, "--concurrency", "4",
                          "--config", path, *(["--reload"] if self.code is not None else []))
        self.workers.append(name)
        self.running[name] = version
        # Until it is claiming: a worker that finds Redis down at start exits (a supervisor
        # such as `cronsvc up` or systemd starts it again), and a fault injected before it
        # connected would leave the fleet short of a worker for the rest of the run.
        wait_for(lambda: self.r.zscore(K.workers, name) is not None, timeout=60,
                 message=f"{name} to start claiming")

    def start_planner(self, version: str | None = None) -> None:
        name = self._name("planner")
        version, path = self._file(version)
        self.fleet.planner(name, "--config", path)
        self.planners.append(name)
        self.running[name] = version
        # Until it has ticked, as a worker until it claims: a planner that finds Redis down
        # at start exits, and the next fault (a Redis restart) may come before it connected.
        wait_for(lambda: self.r.zscore(K.planners, name) is not None, timeout=60,
                 message=f"{name} to tick")

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

    def _pause(self, low_ms: int, high_ms: int) -> None:
        """Let a fault last a random while: the clock is what is waited for."""
        until = now_ms() + self.rnd.randint(low_ms, high_ms)
        wait_for(lambda: now_ms() >= until, timeout=60, interval=0.01,
                 message="the fault to last its while")

    def _victim(self, command: bool) -> str:
        """A worker in the middle of a run (of a command, when ``command``: the harm a
        worker's death or freeze can do is to a command), else any."""
        if command:
            wait_for(lambda: any(w in self.workers for w in self.tail.running_on("command")),
                     timeout=30, message="a command to be running")
        busy = [w for w in self.tail.running_on("command" if command else None)
                if w in self.workers]
        return self.rnd.choice(busy or self.workers)

    # -- faults ------------------------------------------------------------
    def kill_worker(self) -> None:
        """kill -9 of a worker in the middle of a run (if any runs), then a new one. The
        processes its commands started must die with it. With limits, the victim holds a
        slot of one (it runs a command) whenever one does; with dispatch, most often a
        worker that sent a fire's message that no consumer has started yet; under
        --reload, a worker process of a supervisor, which starts the next."""
        if self.code is not None:
            self.kill_reloaded()
            return
        if self.consumers is not None:
            name = (self.rnd.random() < 0.7 and self._sender()) or self.rnd.choice(self.workers)
        else:
            name = self._victim(self.scenario.limits or self.rnd.random() < 0.5)
        pids = self.tail.command_pids(name)
        self.workers.remove(name)
        at = self._kill(name)
        self.faults.append(Fault("kill", name, at, at))
        self._check_gone(name, pids, "kill -9 of its worker",
                         2 * int(float(self.scenario.lease) * 1000))
        self.let_run(0, 3)
        self.start_worker()

    def _sender(self, within_ms: int = 3000) -> str | None:
        """A worker between the send of a fire's message and its start by a consumer, if
        one shows within ``within_ms`` (messages wait only while the consumers are busy)."""
        found: list[str] = []

        def seen() -> bool:
            holder = sending_holder(self.r)
            if holder in self.workers:
                found.append(str(holder))
            return bool(found) or now_ms() >= deadline

        deadline = now_ms() + within_ms
        wait_for(seen, timeout=30, interval=0.005, message="a message sent and not started")
        return found[0] if found else None

    def _check_gone(self, worker: str, pids: list[int], why: str, within_ms: int) -> None:
        """Each of ``pids`` must end within ``within_ms``; one left is an orphan."""
        deadline = now_ms() + within_ms
        wait_for(lambda: now_ms() >= deadline or not any(pid_alive(p) for p in pids),
                 timeout=30, message="the commands of a stopped worker to end")
        for pid in pids:
            if pid_alive(pid):
                self.orphans.append(f"pid {pid} of {worker} outlived {why}")
                os.kill(pid, signal.SIGKILL)

    def kill_reloaded(self) -> None:
        """kill -9 of a worker process a supervisor runs (the current one, or an old one
        finishing its runs), one in the middle of a run if any: the supervisor starts the
        next itself. A supervisor gives up after five in a minute: at most three each."""
        info = {wid: json_object(raw) or {} for wid, raw in self.r.hgetall(K.worker_info).items()}
        cutoff, busy = now_ms() - 60_000, set(self.tail.running_on())
        found: list[tuple[str, str, int]] = []  # (supervisor, worker id, pid)
        for sup in self.workers:
            if len([t for t in self.kills.get(sup, []) if t > cutoff]) >= 3:
                continue
            up = up_pids(self.fleet.log(sup))
            found += [(sup, wid, pid) for wid, state in info.items()
                      if (wid == sup or wid.startswith(f"{sup}~"))
                      and (pid := state.get("pid")) in up and pid_alive(pid)]
        if not found:
            return
        sup, wid, pid = self.rnd.choice([f for f in found if f[1] in busy] or found)
        at = now_ms()
        os.kill(pid, signal.SIGKILL)
        wait_for(lambda: not pid_alive(pid), timeout=30, message=f"{wid} to die")
        self.kills.setdefault(sup, []).append(at)
        self.faults.append(Fault("kill", wid, at, at))
        self.let_run(0, 3)

    def swap_code(self) -> None:
        """The next version of the jobs' code, until every supervisor swapped its worker."""
        assert self.code is not None, "code to edit in the reload scenario only"
        at = now_ms()
        self._write_and_swap()
        self.faults.append(Fault("swap", f"code {self.code.versions}", at, now_ms()))

    def break_code(self) -> None:
        """A version that does not import: every supervisor keeps its worker on the old
        code and says why; runs go on; then a fixed version, swapped in."""
        assert self.code is not None, "code to edit in the reload scenario only"
        at = now_ms()
        before = {sup: refusals(self.fleet.log(sup)) for sup in self.workers}
        self.code.write_broken()
        wait_for(lambda: all(refusals(self.fleet.log(s)) > n for s, n in before.items()),
                 timeout=90, message="every supervisor to refuse the broken code")
        self.let_run(2, 6)
        self._write_and_swap()
        self.faults.append(Fault("broken", f"code {self.code.versions}", at, now_ms()))

    def _write_and_swap(self) -> None:
        assert self.code is not None, "code to edit in the reload scenario only"
        before = {sup: swaps(self.fleet.log(sup)) for sup in self.workers}
        self.code.write_next()
        wait_for(lambda: all(swaps(self.fleet.log(s)) > n for s, n in before.items()),
                 timeout=90, message=f"every supervisor to swap in code {self.code.versions}")

    def restart_planner(self) -> None:
        name = self.rnd.choice(self.planners)
        self.planners.remove(name)
        at = self._kill(name)
        self.let_run(1, 15)
        self.start_planner(self.running.pop(name))
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

    def restart_broker(self) -> None:
        """kill -9 of the Celery broker, restarted from its AOF a random while later: the
        fires due meanwhile wait to be sent, and the messages it took survive."""
        assert self.consumers is not None, "no broker in this scenario"
        down = now_ms()
        self.consumers.broker.kill()
        self._pause(200, 3000)
        self.consumers.broker.start()
        self.faults.append(Fault("broker", "broker", down, now_ms()))

    def redis_oom(self) -> None:
        """maxmemory below what Redis holds, for up to three leases: every write is refused
        with OOM (reads still work), then room again."""
        at = now_ms()
        self.r.config_set("maxmemory", "1")
        try:
            self._pause(200, 3000)
        finally:
            self.r.config_set("maxmemory", "0")
        self.faults.append(Fault("oom", "redis", at, now_ms()))

    def redis_readonly(self) -> None:
        """Redis turned into a replica of a master that does not answer (as after a failover
        to another node), so every write is refused with READONLY; then a master again. Its
        data stays: a replica drops it only once it syncs with a master."""
        with socket.socket() as sock:  # a loopback port nothing listens on
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        at = now_ms()
        self.r.execute_command("REPLICAOF", "127.0.0.1", str(port))
        try:
            self._pause(200, 3000)
        finally:
            self.r.execute_command("REPLICAOF", "NO", "ONE")
        self.faults.append(Fault("readonly", "redis", at, now_ms()))

    def freeze_worker(self) -> None:
        """SIGSTOP of a worker (a long GC pause, a VM frozen) for longer than its lease, then
        SIGCONT: its commands must be stopped before another worker runs their fires."""
        name = self._victim(self.rnd.random() < 0.8)
        pids = self.tail.command_pids(name)
        at = now_ms()
        self.fleet.signal(name, signal.SIGSTOP)
        try:
            lease = int(float(self.scenario.lease) * 1000)
            self._pause(lease + 500, 4 * lease)
            # Past its lease, another worker may run the fire: the command must be gone.
            self._check_gone(name, [p for p in pids if p in self.tail.command_pids(name)],
                             "its frozen worker's lease", 300)
        finally:
            self.fleet.signal(name, signal.SIGCONT)
        self.faults.append(Fault("freeze", name, at, now_ms()))

    def write_garbage(self) -> None:
        """Garbage in every key the fleet reads (tests/chaos/garbage.py): it must be set
        aside or skipped, and every fire of the well-formed jobs still run."""
        at = now_ms()
        self.planted.append(plant(self.r, K, self.server_ms(), "latest-0",
                                  self.rnd.choice(self.workers)))
        self.faults.append(Fault("garbage", "redis", at, now_ms()))

    def stop_workers(self) -> None:
        """SIGTERM every worker; start new ones once a fire waited past the starting deadline."""
        at = now_ms()
        for name in self.workers:
            self.fleet.signal(name, signal.SIGTERM)
        for name in self.workers:
            self.fleet.wait(name, timeout=60)
        count, self.workers = len(self.workers), []
        late = int((STARTING_DEADLINE + 0.5) * 1000)
        # A fire of a job with a starting deadline: the others (and runtime schedules) may
        # wait as long as they like.
        bounded = {name for name, job in self.files[self.version].jobs.items()
                   if job.starting_deadline}

        def overdue() -> bool:
            old = self.r.zrangebyscore(K.queue, "-inf", self.server_ms() - late)
            return any(job_of(str(fid)) in bounded for fid in old)

        wait_for(overdue, timeout=60, message="a fire to wait past its starting deadline")
        for _ in range(count):
            self.start_worker()
        self.faults.append(Fault("stop", "workers", at, now_ms()))

    def deploy(self) -> None:
        """A rolling deploy of the other job file: planners one at a time (two files side by
        side for a while), then workers one at a time, each stopped with SIGTERM."""
        target = VERSIONS[1 - VERSIONS.index(self.version)]
        at = now_ms()
        self.version = target
        for name in list(self.planners):
            self.planners.remove(name)
            self.fleet.signal(name, signal.SIGTERM)
            self.fleet.wait(name, timeout=60)
            self.running.pop(name)
            self.start_planner(target)
            self.let_run(3, 10)
        self._wait_published(target)
        for name in list(self.workers):
            self.workers.remove(name)
            self.fleet.signal(name, signal.SIGTERM)
            self.fleet.wait(name, timeout=60)
            self.running.pop(name)
            self.start_worker(target)
            self.let_run(1, 5)
        self.faults.append(Fault("deploy", target, at, now_ms()))

    def _wait_published(self, version: str) -> None:
        """Until ``version`` is the newest generation; its publish opens an epoch."""
        digest = self.files[version].digest
        wait_for(lambda: self.r.hget(K.generation, "digest") == digest, timeout=60,
                 message=f"{version} to be published")
        self.epochs.append(Epoch(int(self.r.hget(K.generation, "at") or 0), version))

    # -- the run -----------------------------------------------------------
    def server_ms(self) -> int:
        sec, usec = self.r.time()
        return int(sec) * 1000 + int(usec) // 1000

    def run(self) -> Totals:
        s = self.scenario
        if self.consumers is not None:
            self.consumers.start()
        for _ in range(s.planners):
            self.start_planner()
        for _ in range(s.workers):
            self.start_worker()
        self._wait_published(self.version)
        wait_for(lambda: self.r.hlen(K.jobs) == len(self.files[self.version].jobs), timeout=60,
                 message="the planners to publish the jobs")
        start = self.server_ms()  # every fire after this is planned: published before
        self.let_run(1, 1)
        if self.churn is not None:
            self.churn.start()
        actions: dict[str, Callable[[], None]] = {
            "kill": self.kill_worker, "planner": self.restart_planner,
            "redis": self.restart_redis, "stop": self.stop_workers, "oom": self.redis_oom,
            "readonly": self.redis_readonly, "freeze": self.freeze_worker,
            "deploy": self.deploy, "garbage": self.write_garbage, "broker": self.restart_broker,
            "swap": self.swap_code, "broken": self.break_code}
        # Each fault of the scenario once in a random order, then at random.
        todo = self.rnd.sample(s.faults, len(s.faults))
        end_at = time.monotonic() + s.seconds
        while time.monotonic() < end_at or todo:
            self.let_run(3, 15)
            actions[todo.pop() if todo else self.rnd.choice(s.faults)]()
        if self.code is not None:
            # The last fault may have written the code just now: runs on it, before the
            # judge looks for the last version running at the end. A worker of the old
            # code may still start the fires it claimed ahead of the swap: the wait is for
            # the latest start to be on the last version.
            self.let_run(3, 6)
            last = self.code.versions
            wait_for(lambda: code_runs(read_ledger(self.fleet.ledger)).last == last,
                     timeout=60, interval=0.1, message=f"the latest run to be on code {last}")
        if self.churn is not None:
            self.churn.stop()  # its schedules are deleted: their fires end here
        end = self.server_ms()
        self.settle(end)
        # No process ends because of what it read: each one still runs until it is stopped.
        self.exited = [f"{name} exited with {proc.returncode}"
                       for name, proc in self.fleet.procs.items()
                       if name in (*self.workers, *self.planners) and proc.poll() is not None]
        if self.consumers is not None:
            self.exited += self.consumers.exited()
        self.fleet.stop_all()
        (self.tmp / "faults.json").write_text(json.dumps([vars(f) for f in self.faults]))
        return self.judge(start, end)

    def settle(self, end: int, timeout: float = 120) -> None:
        """Wait until every fire due by ``end`` is planned, and none is queued or running."""
        jobs = self.files[self.version].jobs
        behind: list[str] = []  # what the last look found still to do, for the failure

        def settled() -> bool:
            marks = self.r.hgetall(K.watermarks)
            behind[:] = [f"{name} planned to {marks.get(name)}" for name in jobs
                         if int(marks.get(name, 0)) < end]
            pending = self.r.zrange(K.queue, 0, -1) + self.r.zrange(K.working, 0, -1)
            behind.extend(str(fid) for fid in pending
                          if not is_fire_id(str(fid)) or parse_fire(str(fid))[1] <= end)
            return not behind

        try:
            wait_for(settled, timeout=timeout, interval=0.1,
                     message=f"the fires due by {end} to be run or dropped")
        except BaseException:
            print(f"still to do: {behind[:20]}")
            raise

    def judge(self, start: int, end: int) -> Totals:
        names = {name for config in self.files.values() for name in config.jobs}
        # Lines a garbage fault wrote are not records: skipped, as every reader does.
        history = [h for job in sorted(names) for x in self.r.lrange(K.history(job), 0, -1)
                   if (h := json_object(x)) and isinstance(h.get("fire"), str)]
        events = [e for x in self.r.lrange(K.events, 0, -1) if (e := json_object(x))]
        self.events = events
        totals = judge({v: c.jobs for v, c in self.files.items()}, self.epochs, start, end,
                       read_ledger(self.fleet.ledger), history, events, self.faults,
                       self.churn.changes if self.churn is not None else None,
                       lease_ms=int(float(self.scenario.lease) * 1000),
                       ridden_ms=int((ridden_out(float(self.scenario.lease)) - SLACK_S) * 1000))
        totals.orphans += self.orphans
        if self.consumers is not None:
            self.copies = count_copies(self.fleet.ledger, history, start, end)
        if self.code is not None:
            self.code_runs = code_runs(read_ledger(self.fleet.ledger))
        return totals

    def report(self, totals: Totals) -> str:
        counts = collections.Counter(f.kind for f in self.faults)
        kinds = ", ".join(f"{n} {kind}" for kind, n in sorted(counts.items()))
        return "\n".join([
            f"chaos scenario {self.scenario.name}: seed {self.seed}, "
            f"{self.scenario.seconds:.0f} s of faults ({kinds}); files in {self.tmp}",
            *(f"  {line}" for line in totals.lines()),
            *(f"  {line}" for line in (self.copies.lines() if self.copies else [])),
            *(f"  {line}" for line in self.reload_lines()),
        ])

    def reload_lines(self) -> list[str]:
        if self.code is None or self.code_runs is None:
            return []
        logs = [self.fleet.log(name) for name in self.fleet.procs if name.startswith("worker")]
        return self.code_runs.lines(self.code, sum(swaps(log) for log in logs),
                                    sum(refusals(log) for log in logs), len(logs))

    def story(self, problems: Iterable[str], most: int = 3) -> str:
        """What happened to the first fires named in ``problems``: the faults and schedule
        calls within 5 s of their due time, Redis's decisions on them (and on their schedule),
        and every log line naming them. A failure shows it before the logs' tails, which a
        long report cuts."""
        fids: list[str] = []
        for problem in problems:
            m = re.match(r"(\S+@\S+?):?(?:\s|$)", problem)
            if m and m.group(1) not in fids:
                fids.append(m.group(1))
        out = []
        for fid in fids[:most]:
            due, sid = parse_fire(fid)[1], schedule_of(fid)
            out.append(f"--- what happened to {fid}")
            out += [f"  fault {f.kind} {f.target} {f.start_ms - due:+d}..{f.end_ms - due:+d} ms"
                    for f in self.faults if f.start_ms - 5000 <= due <= f.end_ms + 5000]
            if sid is not None and self.churn is not None:
                out += [f"  schedule call {c.t0 - due:+d}..{c.t1 - due:+d} ms: "
                        f"{'deleted' if c.after is None else f'version {c.after.version}'}"
                        for c in self.churn.changes
                        if c.sid == sid and c.t0 - 5000 <= due <= c.t1 + 5000]
            out += [f"  redis {json.dumps(e)}" for e in reversed(self.events)
                    if e.get("fire") == fid or sid is not None and e.get("schedule") == sid
                    and abs(int(e.get("at", 0)) - due) <= 5000]
            for log in sorted(self.tmp.glob("*.log")):  # every process that ran
                out += [f"  {log.stem}: {line}" for line in
                        log.read_text(errors="replace").splitlines() if fid in line]
        return "\n".join(out)

    def close(self) -> None:
        if self.churn is not None:
            self.churn.stopping.set()
            self.churn.close()
        for name in self.workers:  # a frozen worker cannot stop
            try:
                self.fleet.signal(name, signal.SIGCONT)
            except ProcessLookupError:
                pass
        self.fleet.stop_all()
        if self.consumers is not None:
            self.consumers.close()
        self.r.close()
