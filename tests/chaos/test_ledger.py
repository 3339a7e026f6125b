"""The chaos judge's verdicts on runtime schedules, from hand-made ledgers: it must see a
run of a definition after the call that ended it, and a fire of a live schedule that
never ran."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cronsvc.fires import fire_id
from cronsvc.process.redis_server import RedisServer
from tests.chaos.harness import ChaosRun, Scenario
from tests.chaos.ledger import Change, Definition, Epoch, Fault, judge

T0 = 1_800_000_000_000
V1 = Definition("latest-0", 1000, T0 + 500, 1)
V2 = Definition("latest-0", 2000, T0 + 100, 2)
# created at T0, changed to V2 at T0 + 5 s, deleted at T0 + 9 s (each call takes 20 ms)
CHANGES = [Change("s", T0, T0 + 20, V1), Change("s", T0 + 5000, T0 + 5020, V2),
           Change("s", T0 + 9000, T0 + 9020, None)]


def start(d: Definition, due: int, at: int | None = None, attempt: int = 1) -> dict[str, Any]:
    return {"event": "start", "fire": fire_id(d.job, due, schedule="s"), "job": d.job,
            "attempt": attempt, "worker": "w", "at_ms": due + 5 if at is None else at,
            "scheduled_ms": due, "version": "v1", "kind": "call", "payload": {"v": d.version}}


def every_fire_ran() -> list[dict[str, Any]]:
    return [start(V1, T0 + 500 + k * 1000) for k in range(5)] + \
        [start(V2, T0 + 6100 + k * 2000) for k in range(2)]


def verdict(ledger: list[dict[str, Any]], faults: list[Fault] | None = None) -> Any:
    return judge({"v1": {}}, [Epoch(T0 - 60_000, "v1")], T0 - 1, T0 + 12_000, ledger, [], [],
                 faults or [], CHANGES)


def test_every_fire_of_each_definition_in_force_ran() -> None:
    t = verdict(every_fire_ran())
    assert t.ok(), t.lines()
    assert (t.schedule_fires, t.schedule_runs, t.schedule_calls) == (7, 7, 3)


def test_a_run_of_a_changed_definition_after_the_change_returned_is_caught() -> None:
    # V1's fire due at T0 + 4500, still queued at the change, was unqueued by it.
    late = start(V1, T0 + 4500, at=T0 + 7000)
    t = verdict([e for e in every_fire_ran() if e["scheduled_ms"] != T0 + 4500] + [late])
    assert len(t.stale) == 1 and not t.ok()
    # Claimed just before the change, it may start just after.
    just = start(V1, T0 + 4500, at=T0 + 5100)
    assert verdict([e for e in every_fire_ran() if e["scheduled_ms"] != T0 + 4500] + [just]).ok()
    # V1's fire due at T0 + 5500 is not V1's any more.
    t = verdict([*every_fire_ran(), start(V1, T0 + 5500)])
    assert t.strangers and not t.ok()


def test_a_run_after_a_delete_is_caught() -> None:
    t = verdict([*every_fire_ran(), start(V2, T0 + 10_100)])
    assert t.strangers and not t.ok()


def test_a_fire_of_a_live_schedule_that_never_ran_is_lost() -> None:
    ledger = every_fire_ran()
    del ledger[2]  # V1 at T0 + 2500, long before the change
    t = verdict(ledger)
    assert t.lost == [fire_id("latest-0", T0 + 2500, schedule="s")]
    # Due just before the change, it may have been unqueued by it before a claim.
    del ledger[3]  # V1 at T0 + 4500
    assert len(verdict(ledger).lost) == 1
    # During a fault, longer before.
    stop = Fault("stop", "workers", T0 + 2000, T0 + 3000)
    assert verdict(ledger, [stop]).ok()


def _runs(*spans: tuple[str, int, int | None, str]) -> list[dict[str, Any]]:
    """Ledger lines of runs ``(job, start, end or None, worker)``, one fire each."""
    out: list[dict[str, Any]] = []
    for n, (job, start, end, worker) in enumerate(spans):
        fid = fire_id(job, T0 + n)
        out.append({"event": "start", "fire": fid, "job": job, "attempt": 1,
                    "worker": worker, "at_ms": start})
        if end is not None:
            out.append({"event": "end", "fire": fid, "job": job, "attempt": 1,
                        "worker": worker, "at_ms": end})
    return out


def test_a_rerun_during_a_spell_shorter_than_what_leases_ride_out_is_unexplained() -> None:
    due = T0 + 1500
    rerun = every_fire_ran() + [start(V1, due, at=due + 3000, attempt=2)]
    spell = [Fault("oom", "redis", due + 1000, due + 2000)]  # 1 s of refused writes

    def judged(ridden_ms: int) -> Any:
        return judge({"v1": {}}, [Epoch(T0 - 60_000, "v1")], T0 - 1, T0 + 12_000, rerun, [],
                     [], spell, CHANGES, ridden_ms=ridden_ms)

    assert judged(ridden_ms=500).unexplained == []  # a spell past what leases ride out
    [found] = judged(ridden_ms=1500).unexplained
    assert found.startswith(fire_id("latest-0", due, schedule="s"))


def test_runs_of_a_named_limit_over_its_cap_are_caught_and_a_kill_ends_a_run() -> None:
    from cronsvc.config.models import parse_config
    from tests.chaos.ledger import limits_kept

    config = parse_config("limits: {db: 2}\njobs:\n" + "".join(
        f"  {j}: {{cron: '* * * * *', command: ['true'], tags: [db]}}\n"
        for j in ("a", "b", "c")), "f.yaml")
    files = {"v1": config.jobs}
    # a runs 0-100; b dies with w2, killed at 50; c starts at 60: two at once at most.
    kill = Fault("kill", "w2", 50, 50)
    ok = _runs(("a", 0, 100, "w1"), ("b", 10, None, "w2"), ("c", 60, 120, "w3"))
    assert limits_kept(files, ok, [kill], 1000) == ([], {"db": (2, 2)})
    # Without the kill, b is still running when c starts: three at once.
    problems, most = limits_kept(files, ok, [], 1000)
    assert most == {"db": (3, 2)} and problems and problems[0].startswith("limit db: 3 runs")
    # The command of a killed worker may write its start line a few ms after the kill: the
    # kill still ends that run (the worker starts nothing after it).
    late = _runs(("a", 0, 100, "w1"), ("b", 55, None, "w2"), ("c", 60, 120, "w3"))
    assert limits_kept(files, late, [kill], 1000) == ([], {"db": (2, 2)})


def test_a_failure_tells_what_happened_to_the_fires_in_question(
        tmp_path: Path, redis_server: RedisServer) -> None:
    run = ChaosRun(tmp_path, redis_server, Scenario("s", 1, ("kill",), churn=True), 1)
    assert run.churn is not None
    due = T0 + 6100
    fid, other = fire_id("latest-0", due, schedule="s"), fire_id("latest-0", T0 + 500)
    run.faults = [Fault("kill", "worker-2", due + 1000, due + 1000),
                  Fault("redis", "redis", due + 60_000, due + 61_000)]
    run.churn.changes = CHANGES
    run.events = [{"event": "reclaimed", "fire": fid, "at": due + 5},  # newest first
                  {"event": "schedule changed", "schedule": "s", "at": due + 3},
                  {"event": "claimed", "fire": other, "at": T0 + 500}]
    (tmp_path / "worker-3.log").write_text(f"ok {other}\nok {fid} attempt=1\n")
    (tmp_path / "worker-4.log").write_text(f"ok {fid} attempt=2\n")
    story = run.story([f"{fid}: attempt 1 on worker-3 at {due + 2}", "limit db: 3 runs at 5"])
    assert story.splitlines() == [
        f"--- what happened to {fid}",
        "  fault kill worker-2 +1000..+1000 ms",
        "  schedule call -1100..-1080 ms: version 2",
        "  schedule call +2900..+2920 ms: deleted",
        f'  redis {{"event": "schedule changed", "schedule": "s", "at": {due + 3}}}',
        f'  redis {{"event": "reclaimed", "fire": "{fid}", "at": {due + 5}}}',
        f"  worker-3: ok {fid} attempt=1",
        f"  worker-4: ok {fid} attempt=2"]
