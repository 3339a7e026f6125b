"""The running service, end to end: real planner and worker processes, real Redis."""

from __future__ import annotations

import collections
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from cronsvc.fires import parse_fire
from cronsvc.keys import Keys
from cronsvc.testing import BLOCK, Fleet, history, read_ledger
from tests.support.wait import wait_for

pytestmark = pytest.mark.slow

K = Keys()


@pytest.fixture
def fleet(tmp_path: Path, redis_url: str) -> Iterator[Fleet]:
    made: list[Fleet] = []

    def make(jobs: dict, **top: object) -> Fleet:  # type: ignore[type-arg]
        f = Fleet(tmp_path, redis_url, jobs, **top)
        made.append(f)
        return f

    yield make  # type: ignore[misc]
    for f in made:
        f.stop_all()


def server_ms(r: redis.Redis) -> int:
    sec, usec = r.time()
    return int(sec) * 1000 + int(usec) // 1000


def starts(f: Fleet, job: str | None = None) -> list[dict]:  # type: ignore[type-arg]
    return [e for e in read_ledger(f.ledger)
            if e["event"] == "start" and (job is None or e["job"] == job)]


def test_every_second_runs_exactly_once_with_two_planners_and_three_workers(
    fleet, r: redis.Redis  # type: ignore[no-untyped-def]
) -> None:
    f = fleet({})
    f.write({"tick": f.call_job("* * * * * *")})
    f.planner("planner-a")
    f.planner("planner-b")
    for i in range(3):
        f.worker(f"worker-{i}", "--concurrency", "2")
    wait_for(lambda: len({e["fire"] for e in starts(f)}) >= 8, timeout=40,
             message="eight fires of an every-second job")
    f.stop_all()
    runs = starts(f)
    fires = collections.Counter(e["fire"] for e in runs)
    assert [fid for fid, n in fires.items() if n > 1] == [], f.logs()
    dues = sorted(parse_fire(fid)[1] for fid in fires)
    # No gaps: every second between the first and the last fire ran.
    assert dues == list(range(dues[0], dues[-1] + 1, 1000)), f.logs()
    assert all(e["at_ms"] >= e["scheduled_ms"] for e in runs)
    assert {e["worker"] for e in runs} <= {f"worker-{i}" for i in range(3)}
    assert r.zcard(K.working) == 0


def test_kill9_mid_job_runs_again_elsewhere_with_attempt_2(fleet, r: redis.Redis) -> None:  # type: ignore[no-untyped-def]
    f = fleet({})
    f.write({"slow": f.call_job("0 0 1 1 *", call=BLOCK)})
    f.worker("worker-a", "--lease", "1")
    fid = f.trigger("slow")
    first = wait_for(lambda: starts(f, "slow"), message="the first attempt to start")
    assert first[0]["fire"] == fid and first[0]["attempt"] == 1
    f.signal("worker-a", signal.SIGKILL)
    f.wait("worker-a")
    f.worker("worker-b", "--lease", "1")
    second = wait_for(lambda: [e for e in starts(f, "slow") if e["attempt"] == 2],
                      message="the fire to start again after the lease")
    assert second[0]["fire"] == fid and second[0]["worker"] == "worker-b"
    Path(f.release).touch()
    done = wait_for(lambda: [h for h in history(r, "slow") if h["status"] == "ok"],
                    message="the second attempt to be acknowledged")
    assert done[0]["attempt"] == 2 and done[0]["worker"] == "worker-b"
    assert r.zcard(K.working) == 0 and r.zcard(K.queue) == 0


def test_retries_then_dead_letter(fleet, r: redis.Redis) -> None:  # type: ignore[no-untyped-def]
    f = fleet({})
    f.write({"broken": {"cron": "0 0 1 1 *", "command": ["false"], "retries": 2,
                        "backoff": 0.05}})
    f.worker("worker-a")
    fid = f.trigger("broken")
    wait_for(lambda: r.zscore(K.dead, fid) is not None, message="the fire to be dead")
    statuses = [(h["status"], h.get("attempt")) for h in history(r, "broken")]
    assert statuses == [("failed", 1), ("failed", 2), ("failed", 3), ("dead", 3)], statuses


def test_overlap_forbid_across_two_workers(fleet, r: redis.Redis) -> None:  # type: ignore[no-untyped-def]
    f = fleet({})
    f.write({"exclusive": f.call_job("* * * * * *", call=BLOCK, overlap="forbid",
                                     catch_up="all")})
    f.planner()
    f.worker("worker-a")
    f.worker("worker-b")
    first = wait_for(lambda: starts(f, "exclusive"), message="the first run")[0]
    wait_for(lambda: len([h for h in history(r, "exclusive")
                          if h["reason"] == "overlap forbid"]) >= 2,
             message="two fires skipped by the overlap rule")
    assert len(starts(f, "exclusive")) == 1  # nothing else started while it ran
    Path(f.release).touch()
    wait_for(lambda: len(starts(f, "exclusive")) >= 3, message="runs to resume")
    f.stop_all()
    # At most one run at a time: each start comes after the previous end.
    events = [e for e in read_ledger(f.ledger) if e["job"] == "exclusive"]
    open_runs = 0
    for e in events:
        open_runs += 1 if e["event"] == "start" else -1
        assert open_runs <= 1
    assert first["fire"] != starts(f, "exclusive")[1]["fire"]


def test_catch_up_latest_after_workers_were_down(fleet, r: redis.Redis) -> None:  # type: ignore[no-untyped-def]
    f = fleet({})
    f.write({"tick": f.call_job("* * * * * *")})
    f.planner()
    begin = server_ms(r)
    # No worker: let several fires fall due.
    wait_for(lambda: r.zcount(K.queue, "-inf", server_ms(r)) >= 4, message="four overdue fires")
    f.worker("worker-a")
    wait_for(lambda: starts(f, "tick"), message="the first run after the outage")
    f.stop_all()
    hist = history(r, "tick")
    overdue = [h for h in hist if h["scheduled"] >= begin]
    first_ok = next(h for h in overdue if h["status"] == "ok")
    skipped = [h for h in overdue if h["status"] == "skipped"]
    assert len(skipped) >= 3 and all(h["reason"] == "catch_up latest" for h in skipped)
    assert all(h["scheduled"] < first_ok["scheduled"] for h in skipped)
    ran = collections.Counter(e["fire"] for e in starts(f))
    assert all(n == 1 for n in ran.values())


def test_edit_and_removal_take_effect_while_running(fleet, r: redis.Redis) -> None:  # type: ignore[no-untyped-def]
    f = fleet({})
    f.write({"a": f.call_job("* * * * * *"), "b": f.call_job("* * * * * *")})
    f.planner()
    f.worker("worker-a")
    wait_for(lambda: {"a", "b"} <= {e["job"] for e in starts(f)}, message="both jobs run")
    f.write({"a": f.call_job("0 0 1 1 *")})  # a: once a year; b: removed
    wait_for(lambda: "1 1 *" in (r.hget(K.specs, "a") or "") and not r.hexists(K.jobs, "b"),
             message="the planner to publish the edit")
    changed_at = server_ms(r)
    wait_for(lambda: server_ms(r) > changed_at + 2500, message="two more seconds")
    late = [e for e in starts(f) if e["scheduled_ms"] > changed_at + 1000]
    assert late == [], late
    queued = r.zrange(K.queue, 0, -1)
    assert not [q for q in queued if q.startswith(("a@", "b@"))
                and parse_fire(q)[1] < changed_at + 86_400_000]


def test_pause_and_resume(fleet, r: redis.Redis) -> None:  # type: ignore[no-untyped-def]
    f = fleet({})
    f.write({"tick": f.call_job("* * * * * *")})
    f.planner()
    f.worker("worker-a")
    wait_for(lambda: starts(f, "tick"), message="a first run")
    client = f.client()
    client.pause("tick", note="maintenance")
    paused_at = server_ms(r)
    wait_for(lambda: [h for h in history(r, "tick") if h["reason"] == "paused"],
             message="a fire skipped while paused")
    assert not [e for e in starts(f) if e["at_ms"] > paused_at + 50]
    client.resume("tick")
    resumed_at = server_ms(r)
    wait_for(lambda: [e for e in starts(f) if e["scheduled_ms"] > resumed_at],
             message="runs after resume")


def test_sigterm_lets_the_running_job_finish(fleet, r: redis.Redis) -> None:  # type: ignore[no-untyped-def]
    f = fleet({})
    f.write({"slow": f.call_job("0 0 1 1 *", call=BLOCK)})
    f.worker("worker-a", "--grace", "60")
    fid = f.trigger("slow")
    wait_for(lambda: starts(f, "slow"), message="the run to start")
    f.signal("worker-a", signal.SIGTERM)
    Path(f.release).touch()
    assert f.wait("worker-a") == 0
    assert [h["status"] for h in history(r, "slow")] == ["ok"]
    assert r.zscore(K.working, fid) is None


def test_sigterm_after_grace_gives_the_fire_back(fleet, r: redis.Redis) -> None:  # type: ignore[no-untyped-def]
    f = fleet({})
    f.write({"slow": f.call_job("0 0 1 1 *", call=BLOCK)})
    f.worker("worker-a", "--grace", "0.2")
    fid = f.trigger("slow")
    wait_for(lambda: starts(f, "slow"), message="the run to start")
    f.signal("worker-a", signal.SIGTERM)
    assert f.wait("worker-a") == 0
    # Back in the queue, attempt not used: the next worker runs it as attempt 1.
    assert r.zscore(K.queue, fid) is not None, f.logs()
    Path(f.release).touch()
    f.worker("worker-b")
    wait_for(lambda: [h for h in history(r, "slow") if h["status"] == "ok"],
             message="the fire to run on the next worker")
    assert [h["attempt"] for h in history(r, "slow") if h["status"] == "ok"] == [1]


def _gone(pid: int) -> bool:
    """True once ``pid`` has exited (a zombie waiting for its reaper counts as exited)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


def _pid_from(path: Path) -> int:
    text = wait_for(lambda: path.exists() and path.read_text().strip(),
                    message=f"{path.name} to be written")
    return int(text)


def test_timeout_kills_the_process_tree_of_a_command(fleet, r: redis.Redis,  # type: ignore[no-untyped-def]
                                                     tmp_path: Path) -> None:
    pidfile = tmp_path / "grandchild.pid"
    f = fleet({})
    f.write({"hang": {"cron": "0 0 1 1 *", "timeout": 0.5, "shell": True,
                      "command": f"sleep 300 & echo $! > {pidfile}; wait"}})
    f.worker("worker-a")
    f.trigger("hang")
    grandchild = _pid_from(pidfile)
    wait_for(lambda: [h for h in history(r, "hang") if h["status"] == "timeout"],
             message="the run to time out")
    wait_for(lambda: _gone(grandchild), message="the backgrounded grandchild to be killed")


def test_kill9_of_a_worker_kills_its_command(fleet, r: redis.Redis, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    pidfile = tmp_path / "command.pid"
    f = fleet({})
    f.write({"long": {"cron": "0 0 1 1 *", "shell": True,
                      "command": f"echo $$ > {pidfile}; exec sleep 300"}})
    f.worker("worker-a")
    f.trigger("long")
    command = _pid_from(pidfile)
    f.signal("worker-a", signal.SIGKILL)
    f.wait("worker-a")
    # No orphan keeps running beside the rerun the lost lease will cause.
    wait_for(lambda: _gone(command), message="the command to die with its worker")


def test_a_run_longer_than_its_lease_keeps_it(fleet, r: redis.Redis) -> None:  # type: ignore[no-untyped-def]
    f = fleet({})
    f.write({"slow": f.call_job("0 0 1 1 *", call=BLOCK)})
    f.worker("worker-a", "--lease", "0.5")
    f.worker("worker-b", "--lease", "0.5")
    fid = f.trigger("slow")
    wait_for(lambda: starts(f, "slow"), message="the run to start")
    held_from = server_ms(r)
    # Six lease lengths later the run still holds its fire: renewals kept it.
    wait_for(lambda: server_ms(r) > held_from + 3000, message="three seconds to pass")
    assert [(e["fire"], e["attempt"]) for e in starts(f, "slow")] == [(fid, 1)]
    assert r.hget(K.attempts, fid) == "1"
    Path(f.release).touch()
    wait_for(lambda: history(r, "slow"), message="the run to finish")
    assert [(h["status"], h["attempt"]) for h in history(r, "slow")] == [("ok", 1)]


def test_overlap_replace_stops_the_running_one(fleet, r: redis.Redis, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    started = tmp_path / "started.txt"
    f = fleet({})
    f.write({"stuck": {"cron": "*/2 * * * * *", "overlap": "replace", "shell": True,
                       "command": f"echo $CRONSVC_FIRE_ID >> {started}; exec sleep 300"}})
    f.planner()
    f.worker("worker-a", "--lease", "1", "--grace", "0.5")
    f.worker("worker-b", "--lease", "1", "--grace", "0.5")

    def fires() -> list[str]:
        return started.read_text().split() if started.exists() else []

    wait_for(lambda: len(fires()) >= 2, message="a second fire to start")
    replaced = wait_for(lambda: [h for h in history(r, "stuck") if h["status"] == "replaced"],
                        message="the first run to be recorded as replaced")
    assert replaced[0]["fire"] == fires()[0]
    assert fires()[1] != fires()[0]


def test_worker_and_planner_processes_serve_metrics(fleet, r: redis.Redis) -> None:  # type: ignore[no-untyped-def]
    import re
    import urllib.request

    f = fleet({})
    f.write({"tick": f.call_job("* * * * * *")})
    f.planner("planner", "--metrics-port", "0")
    f.worker("worker-a", "--metrics-port", "0")

    def scrape(name: str) -> str:
        found = re.search(r"metrics on http://[\d.]+:(\d+)/metrics", f.log(name))
        if not found:
            return ""
        with urllib.request.urlopen(f"http://127.0.0.1:{found[1]}/metrics", timeout=5) as resp:
            return str(resp.read().decode())

    wait_for(lambda: 'cronsvc_runs_total{job="tick",status="ok"}' in scrape("worker-a"),
             message="the worker to count an ok run")
    wait_for(lambda: 'cronsvc_job_next_fire_timestamp_seconds{job="tick"}' in scrape("planner"),
             message="the planner to export the next fire")
