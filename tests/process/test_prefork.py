"""``cronsvc worker --processes N``: one supervisor, N real worker processes, one watchdog
and one presence; a process that dies is replaced, and nothing outlives the supervisor."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
import redis

from cronsvc.keys import Keys
from cronsvc.testing import BLOCK, Fleet, history, read_ledger
from tests.run.test_containment import gone
from tests.support.wait import wait_for

pytestmark = pytest.mark.slow

K = Keys()


def processes(sup: int) -> list[int]:
    """The supervisor's worker processes (not its watchdog)."""
    try:
        children = psutil.Process(sup).children()
    except psutil.NoSuchProcess:
        return []
    found = []
    for child in children:
        try:
            if "watchdog" not in " ".join(child.cmdline()) and not gone(child.pid):
                found.append(child.pid)
        except psutil.Error:
            continue
    return found


def watchdog(sup: int) -> int | None:
    for child in psutil.Process(sup).children():
        try:
            if any("watchdog" in part for part in child.cmdline()):
                return child.pid
        except psutil.Error:
            continue
    return None


def presence(r: redis.Redis, worker: str) -> dict[str, object]:
    raw = r.hget(K.worker_info, worker)
    return json.loads(raw) if raw else {}


def starts(fleet: Fleet) -> list[dict[str, object]]:
    return [e for e in read_ledger(fleet.ledger) if e["event"] == "start"]


@pytest.fixture
def fleet(tmp_path: Path, redis_url: str) -> Iterator[Fleet]:
    f = Fleet(tmp_path, redis_url, {})
    yield f
    Path(f.release).touch()  # blocked runs end, so their workers stop
    f.stop_all()


def test_n_processes_claim_as_one_worker_each_fire_once(fleet: Fleet, r: redis.Redis) -> None:
    fleet.write({"hold": fleet.call_job("0 0 1 1 *", BLOCK)})
    sup = fleet.worker("w", "--processes", "2", "--concurrency", "1")
    fids = {fleet.trigger("hold") for _ in range(4)}
    # One slot each: two fires held at once means both processes claimed one.
    held = wait_for(lambda: len(starts(fleet)) == 2 and starts(fleet),
                    message="both processes to run a fire", timeout=60)
    assert {e["worker"] for e in held} == {"w/1", "w/2"}, fleet.logs()
    assert len({e["pid"] for e in held}) == 2
    info = wait_for(lambda: presence(r, "w").get("processes") == 2 and presence(r, "w"))
    assert (info["slots"], info["pid"]) == (2, sup.pid)
    assert sorted(info["pids"]) == sorted(processes(sup.pid))  # type: ignore[arg-type]
    assert r.zrange(K.workers, 0, -1) == ["w"], "the fleet sees one worker"
    status = subprocess.run(
        [sys.executable, "-m", "cronsvc", "status", "--config", str(fleet.config),
         "--redis-url", fleet.redis_url], capture_output=True, text=True, env=fleet.env)
    assert "workers: 1 live" in status.stdout, status.stderr
    assert f"{sup.pid} (2 processes)" in status.stdout
    Path(fleet.release).touch()
    wait_for(lambda: all(any(h["status"] == "ok" for h in history(r, "hold")
                             if h["fire"] == fid) for fid in fids),
             message="every fire to run", timeout=60)
    assert sorted(e["fire"] for e in starts(fleet)) == sorted(fids), "each fire ran once"


def test_a_process_killed_is_replaced_and_its_fire_recovered(
        fleet: Fleet, r: redis.Redis, tmp_path: Path) -> None:
    events = tmp_path / "events"
    fleet.write({"tree": {"cron": "0 0 1 1 *", "shell": True, "retries": 0, "command": (
        f'echo "$CRONSVC_ATTEMPT $$" >> {events}; '
        '[ "$CRONSVC_ATTEMPT" = 1 ] && exec sleep 300; true')}})
    sup = fleet.worker("w", "--processes", "2", "--lease", "2")
    wait_for(lambda: presence(r, "w").get("processes") == 2, message="both processes up",
             timeout=60)
    fid = fleet.trigger("tree")
    line = wait_for(lambda: events.exists() and events.read_text().split(),
                    message="attempt 1 to start")
    command = int(line[1])
    runner = psutil.Process(command).ppid()
    assert runner in processes(sup.pid), fleet.logs()
    os.kill(runner, signal.SIGKILL)
    # The shared watchdog kills its command at once, not at the lease's end.
    wait_for(lambda: gone(command), message="the killed process's command to die")
    wait_for(lambda: len(processes(sup.pid)) == 2 and runner not in processes(sup.pid),
             message="another process to take its place", timeout=60)
    wait_for(lambda: any(h["status"] == "ok" and h["fire"] == fid
                         for h in history(r, "tree")),
             message="the fire to be recovered", timeout=60)
    assert [x.split()[0] for x in events.read_text().splitlines()] == ["1", "2"]
    assert "exited with code -9: starting another" in fleet.log("w")
    assert sup.poll() is None


def test_sigterm_to_the_supervisor_lets_running_fires_finish(
        fleet: Fleet, r: redis.Redis) -> None:
    fleet.write({"hold": fleet.call_job("0 0 1 1 *", BLOCK)})
    sup = fleet.worker("w", "--processes", "2", "--concurrency", "1")
    fids = {fleet.trigger("hold") for _ in range(2)}
    wait_for(lambda: len(starts(fleet)) == 2, message="both fires to start", timeout=60)
    children = processes(sup.pid)
    sup.send_signal(signal.SIGTERM)
    wait_for(lambda: "stopping: waiting up to" in fleet.log("w"), message="a graceful stop")
    assert sup.poll() is None, "it waits for the running fires"
    Path(fleet.release).touch()
    assert sup.wait(60) == 0, fleet.logs()
    assert all(gone(pid) for pid in children)
    assert {h["fire"] for h in history(r, "hold") if h["status"] == "ok"} == fids
    assert r.zrange(K.workers, 0, -1) == [] and not r.hgetall(K.worker_info)


def test_sigkill_of_the_supervisor_kills_every_process_and_command(
        fleet: Fleet, r: redis.Redis, tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    fleet.write({"tree": {"cron": "0 0 1 1 *", "shell": True, "command": (
        f"sleep 300 & echo $! >> {pids}; sleep 300 & echo $! >> {pids}; "
        f"echo $$ >> {pids}; wait")}})
    sup = fleet.worker("w", "--processes", "2", "--concurrency", "1", "--lease", "2")
    wait_for(lambda: presence(r, "w").get("processes") == 2, message="both processes up",
             timeout=60)
    for _ in range(2):
        fleet.trigger("tree")

    def written() -> list[int]:
        found = pids.read_text().split() if pids.exists() else []
        return [int(pid) for pid in found] if len(found) == 6 else []

    tree = wait_for(written, message="both commands and their children to start")
    children, dog = processes(sup.pid), watchdog(sup.pid)
    assert len(children) == 2 and dog is not None
    # Each process runs one: the commands (their shells lead their groups) belong to both.
    shells = [pid for pid in tree if os.getpgid(pid) == pid]
    assert {psutil.Process(pid).ppid() for pid in shells} == set(children)
    sup.kill()
    sup.wait()
    wait_for(lambda: all(gone(pid) for pid in children), message="the processes to die")
    wait_for(lambda: all(gone(pid) for pid in tree), message="every command to die")
    wait_for(lambda: gone(dog), message="the watchdog to exit")
