"""A command never outlives its lease or its worker: the watchdog process on its own,
then real workers killed, stopped and cut off from Redis while a command runs."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import psutil
import pytest
import redis

from cronsvc.keys import Keys
from cronsvc.run.watchdog import Watchdog
from cronsvc.testing import Fleet, history
from tests.support.paths import ROOT
from tests.support.wait import wait_for

K = Keys()

# A group: a shell and two backgrounded grandchildren, which pdeathsig alone misses.
TREE = ["sh", "-c", "sleep 300 & sleep 300 & wait"]


def gone(pid: int) -> bool:
    """True once ``pid`` has exited (a zombie waiting for its reaper counts as exited)."""
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def members(pgid: int) -> list[int]:
    """The live processes of a process group."""
    found = []
    for proc in psutil.process_iter():
        try:
            if os.getpgid(proc.pid) == pgid and not gone(proc.pid):
                found.append(proc.pid)
        except (ProcessLookupError, psutil.Error):
            continue
    return found


@pytest.fixture
def groups() -> Iterator[Callable[[], subprocess.Popen[bytes]]]:
    """Start process trees in sessions of their own, as the executor does; all killed after."""
    started: list[subprocess.Popen[bytes]] = []

    def start() -> subprocess.Popen[bytes]:
        proc = subprocess.Popen(TREE, start_new_session=True)
        started.append(proc)
        wait_for(lambda: len(members(proc.pid)) == 3, message="the tree to start")
        return proc

    yield start
    for proc in started:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()


def test_the_watchdog_kills_a_group_whose_deadline_passed_and_only_that_one(groups) -> None:  # type: ignore[no-untyped-def]
    dog = Watchdog()
    try:
        due, renewed, released, later = groups(), groups(), groups(), groups()
        tree = members(due.pid)
        now = time.monotonic()
        dog.hold(due.pid, now + 0.2)
        dog.hold(renewed.pid, now + 0.2)
        dog.renew(renewed.pid, now + 600)
        dog.hold(released.pid, now + 0.2)
        dog.release(released.pid)
        dog.hold(later.pid, now + 0.4)
        # Deadlines are handled in order: once `later` is dead, the others' have passed.
        wait_for(lambda: not members(later.pid), message="the later group to be killed")
        assert all(gone(pid) for pid in tree)
        assert due.wait(10) == -signal.SIGKILL
        assert len(members(renewed.pid)) == 3 and len(members(released.pid)) == 3
        assert dog.pid is not None, "the watchdog outlives the groups it killed"
    finally:
        dog.close()


def test_a_watchdog_found_gone_is_replaced_and_holds_every_group_again(groups) -> None:  # type: ignore[no-untyped-def]
    # Killed, it is found gone by the next message (its pipe broken): the new one gets
    # the groups held before and that message, and kills them at their deadline.
    dog = Watchdog()
    try:
        first, second = groups(), groups()
        tree = members(first.pid) + members(second.pid)
        now = time.monotonic()
        dog.hold(first.pid, now + 1.0)
        old = dog.pid
        assert old is not None
        os.kill(old, signal.SIGKILL)
        wait_for(lambda: gone(old), message="the watchdog to die")
        dog.hold(second.pid, now + 1.0)
        assert dog.pid not in (None, old)
        wait_for(lambda: all(gone(pid) for pid in tree), message="both groups to be killed")
    finally:
        dog.close()


def test_the_watchdog_kills_everything_it_holds_when_its_worker_is_killed(  # type: ignore[no-untyped-def]
    groups, tmp_path: Path
) -> None:
    tree = groups()
    pids = members(tree.pid)
    # A stand-in worker: holds the group with a far deadline, says so, then waits.
    with stand_in(f"""
        dog = Watchdog()
        dog.hold({tree.pid}, time.monotonic() + 600)
        print(dog.pid, flush=True)
    """) as worker:
        assert worker.stdout is not None
        dog = int(worker.stdout.readline())
        # Not in the worker's process group: a kill of that group leaves it to clean up.
        assert os.getsid(dog) == dog and os.getpgid(dog) != os.getpgid(worker.pid)
        assert len(members(tree.pid)) == 3
        killed(worker, dog, pids)


@contextmanager
def stand_in(code: str) -> Iterator[subprocess.Popen[bytes]]:
    """A stand-in worker running ``code`` (what it prints is the test's to read), then
    waiting until it is killed; killed at the end in any case."""
    worker = subprocess.Popen(
        [sys.executable, "-c", "import os, subprocess, sys, time\n"
         "from cronsvc.run.watchdog import Watchdog\n"
         f"{textwrap.dedent(code)}\nsys.stdin.read()\n"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=ROOT)
    try:
        yield worker
    finally:
        worker.kill()
        worker.wait()


def killed(worker: subprocess.Popen[bytes], dog: int, pids: list[int]) -> None:
    """Kill the stand-in worker: every process of ``pids`` and its watchdog must end."""
    worker.kill()
    worker.wait()
    wait_for(lambda: all(gone(pid) for pid in pids), message="the whole tree to be killed")
    wait_for(lambda: gone(dog), message="the watchdog to exit")


def marked(fire: str, attempt: int) -> dict[str, str]:
    """The environment a command of that fire and attempt starts with."""
    return {**os.environ, "CRONSVC_FIRE_ID": fire, "CRONSVC_ATTEMPT": str(attempt)}


def test_an_announced_command_never_held_is_found_and_killed_at_its_deadline() -> None:
    dog = Watchdog()
    dog.start()
    started: list[subprocess.Popen[bytes]] = []
    try:
        assert dog.announce(("job@1", "1"), time.monotonic() + 0.3)
        # Its worker never says which group: the watchdog finds it by its environment.
        for attempt in (1, 2):  # attempt 2 was not announced: it runs on
            started.append(subprocess.Popen(TREE, env=marked("job@1", attempt),
                                            start_new_session=True))
        announced, other = started
        wait_for(lambda: len(members(other.pid)) == 3, message="the trees to start")
        wait_for(lambda: not members(announced.pid), message="the announced tree to die")
        assert len(members(other.pid)) == 3
    finally:
        dog.close()
        for proc in started:
            if members(proc.pid):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def test_a_command_announced_and_not_held_yet_dies_with_its_killed_worker() -> None:
    # A stand-in worker killed in the instant between a command's start and its
    # registration: it announces the command, starts it, and never holds its group.
    with stand_in(f"""
        dog = Watchdog()
        dog.start()
        dog.announce(("job@1", "1"), time.monotonic() + 600)
        env = {{**os.environ, "CRONSVC_FIRE_ID": "job@1", "CRONSVC_ATTEMPT": "1"}}
        tree = subprocess.Popen({TREE!r}, env=env, start_new_session=True)
        print(dog.pid, tree.pid, flush=True)
    """) as worker:
        assert worker.stdout is not None
        dog, leader = map(int, worker.stdout.readline().split())
        wait_for(lambda: len(members(leader)) == 3, message="the tree to start")
        killed(worker, dog, members(leader))


# -- real workers ------------------------------------------------------------------

# A command job, run as `python JOB DIR`: attempt 1 starts a grandchild and then ticks
# into DIR/events until it is killed; any later attempt notes its start and ends. Each
# line carries the writer's own wall clock, so the order of two attempts is plain.
JOB = """
import os, signal, subprocess, sys, time

attempt = os.environ["CRONSVC_ATTEMPT"]


def note(*fields):
    fd = os.open(os.path.join(sys.argv[1], "events"), os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    os.write(fd, (" ".join(map(str, fields)) + "\\n").encode())
    os.close(fd)


def on_term(*_):
    note("term", attempt, time.time_ns())
    sys.exit(143)


signal.signal(signal.SIGTERM, on_term)
if attempt != "1":
    note("start", attempt, time.time_ns(), os.getpid())
    sys.exit(0)
child = subprocess.Popen(["sleep", "300"])
note("start", attempt, time.time_ns(), os.getpid(), child.pid)
while True:
    note("tick", attempt, time.time_ns())
    time.sleep(0.05)
"""


def events(tmp: Path) -> list[list[str]]:
    path = tmp / "events"
    return [line.split() for line in path.read_text().splitlines()] if path.exists() else []


def started(tmp: Path, attempt: int) -> list[str] | None:
    return next((e for e in events(tmp) if e[:2] == ["start", str(attempt)]), None)


def command_job(tmp: Path) -> dict[str, object]:
    script = tmp / "job.py"
    script.write_text(JOB)
    return {"cron": "0 0 1 1 *", "command": [sys.executable, str(script), str(tmp)],
            "retries": 0}


def watchdog_of(worker: int) -> int | None:
    for child in psutil.Process(worker).children():
        if any("watchdog" in part for part in child.cmdline()):
            return child.pid
    return None


def renewed(r: redis.Redis, fid: str) -> None:
    """Wait for one renewal of the fire's lease: the run is under the watchdog by then."""
    first = wait_for(lambda: r.zscore(K.working, fid), message="the claim")
    wait_for(lambda: (r.zscore(K.working, fid) or 0) > first, message="a lease renewal")


@pytest.fixture
def fleet(tmp_path: Path, redis_url: str) -> Iterator[Fleet]:
    f = Fleet(tmp_path, redis_url, {})
    yield f
    for proc in f.procs.values():
        if proc.poll() is None:
            proc.send_signal(signal.SIGCONT)
    f.stop_all()


@pytest.mark.slow
def test_kill9_of_a_worker_kills_the_grandchildren_of_its_command(  # type: ignore[no-untyped-def]
    fleet: Fleet, r: redis.Redis, tmp_path: Path
) -> None:
    pids = tmp_path / "pids"
    fleet.write({"tree": {"cron": "0 0 1 1 *", "shell": True, "command": (
        f"sleep 300 & echo $! >> {pids}; sleep 300 & echo $! >> {pids}; "
        f"echo $$ >> {pids}; wait")}})
    worker = fleet.worker("worker-a", "--lease", "2")
    fid = fleet.trigger("tree")

    def written() -> list[int]:
        found = pids.read_text().split() if pids.exists() else []
        return [int(pid) for pid in found] if len(found) == 3 else []

    tree = wait_for(written, message="the command and its two children to start")
    renewed(r, fid)
    dog = watchdog_of(worker.pid)
    assert dog is not None and os.getsid(dog) == dog, fleet.logs()
    fleet.signal("worker-a", signal.SIGKILL)
    fleet.wait("worker-a")
    wait_for(lambda: all(gone(pid) for pid in tree),
             message="every process of the run to die with its worker")
    wait_for(lambda: gone(dog), message="the watchdog to exit")


@pytest.mark.slow
def test_a_stopped_worker_past_its_lease_has_its_command_killed_before_attempt_2(  # type: ignore[no-untyped-def]
    fleet: Fleet, r: redis.Redis, tmp_path: Path
) -> None:
    fleet.write({"tick": command_job(tmp_path)})
    fleet.worker("worker-a", "--lease", "2")
    fid = fleet.trigger("tick")
    first = wait_for(lambda: started(tmp_path, 1), message="attempt 1 to start")
    leader, grandchild = int(first[3]), int(first[4])
    renewed(r, fid)
    fleet.worker("worker-b", "--lease", "2")
    fleet.signal("worker-a", signal.SIGSTOP)
    second = wait_for(lambda: started(tmp_path, 2), message="attempt 2 to start elsewhere")
    # Attempt 1 was gone before attempt 2 began: nothing of it ran beside attempt 2.
    assert gone(leader) and gone(grandchild), fleet.logs()
    last_tick = max(int(e[2]) for e in events(tmp_path) if e[:2] == ["tick", "1"])
    assert last_tick < int(second[2]), fleet.logs()
    assert "its lease could not be renewed in time" in fleet.log("worker-a")
    fleet.signal("worker-a", signal.SIGCONT)
    wait_for(lambda: ("ok", 2) in [(h["status"], h["attempt"]) for h in history(r, "tick")],
             message="attempt 2 to be recorded")
    # Woken up, worker a finds its run killed and its lease gone; it records nothing.
    wait_for(lambda: "lease lost" in fleet.log("worker-a")
             or "lease taken over" in fleet.log("worker-a"),
             message="worker a to drop its stale result")
    runs = sorted((h["attempt"], h["status"], h["worker"]) for h in history(r, "tick"))
    assert runs == [(1, "lost", "worker-a"), (2, "ok", "worker-b")], runs
    assert fleet.procs["worker-a"].poll() is None, fleet.logs()
    fleet.signal("worker-a")
    assert fleet.wait("worker-a") == 0, fleet.log("worker-a")


@pytest.mark.slow
def test_a_worker_cut_off_from_redis_stops_its_command_before_the_lease_lapses(  # type: ignore[no-untyped-def]
    tmp_path: Path, fresh_server
) -> None:
    server = fresh_server()
    r = redis.Redis.from_url(server.url, decode_responses=True)
    f = Fleet(tmp_path, server.url, {"tick": command_job(tmp_path)})
    try:
        f.worker("worker-a", "--lease", "5")
        fid = f.trigger("tick")
        first = wait_for(lambda: started(tmp_path, 1), message="attempt 1 to start")
        renewed(r, fid)
        # A frozen Redis: the worker's renewals hang, as they would across a partition.
        assert server.proc is not None
        server.proc.send_signal(signal.SIGSTOP)
        try:
            # The worker itself stops the run (SIGTERM) before the watchdog would kill it.
            wait_for(lambda: any(e[:2] == ["term", "1"] for e in events(tmp_path)),
                     message="the worker to stop its run")
            wait_for(lambda: gone(int(first[3])) and gone(int(first[4])),
                     message="the run's processes to end")
            assert "lease not renewed" in f.log("worker-a"), f.logs()
        finally:
            server.proc.send_signal(signal.SIGCONT)
        # Nothing recorded for attempt 1; once its lease lapses the fire runs again.
        wait_for(lambda: [h for h in history(r, "tick") if h["status"] == "ok"], timeout=40,
                 message="the fire to run again after the lease")
        runs = sorted((h["attempt"], h["status"]) for h in history(r, "tick"))
        assert runs == [(1, "lost"), (2, "ok")], runs
        assert f.procs["worker-a"].poll() is None, f.logs()
    finally:
        f.stop_all()


@pytest.mark.slow
def test_a_command_longer_than_several_leases_keeps_running_and_succeeds(  # type: ignore[no-untyped-def]
    fleet: Fleet, r: redis.Redis, tmp_path: Path
) -> None:
    release = tmp_path / "release"
    fleet.write({"slow": {"cron": "0 0 1 1 *", "shell": True, "command": (
        f"echo started >> {tmp_path / 'events'}; "
        f"while [ ! -e {release} ]; do sleep 0.05; done")}})
    worker = fleet.worker("worker-a", "--lease", "1")
    fid = fleet.trigger("slow")
    wait_for(lambda: (tmp_path / "events").exists(), message="the run to start")
    since = time.monotonic()
    # Five lease lengths of renewals: the watchdog moved its deadline each time.
    wait_for(lambda: time.monotonic() > since + 5, timeout=30, message="five leases to pass")
    assert watchdog_of(worker.pid) is not None
    release.touch()
    done = wait_for(lambda: history(r, "slow"), message="the run to finish")
    assert [(h["fire"], h["status"], h["attempt"]) for h in done] == [(fid, "ok", 1)], \
        fleet.logs()
    assert "killed process group" not in fleet.log("worker-a")
