"""Workers follow their job file: they run a fire only with the definition published for it.

The claim script against a real Redis with explicit ``now_ms``; a worker in this process
for what it records; real worker and planner processes for reloads and mixed files.
"""

from __future__ import annotations

import collections
import json
import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
import yaml
from click.testing import CliRunner

from cronsvc.cli.main import main
from cronsvc.client.client import Client
from cronsvc.config.models import load_config
from cronsvc.fires import fire_id, new_tag, parse_fire
from cronsvc.keys import Keys
from cronsvc.store.connection import connect
from cronsvc.store.scripts import UNHELD_MS, Scripts
from cronsvc.testing import Fleet, history, read_ledger
from cronsvc.worker.worker import Worker, held_digest
from tests.support.wait import wait_for

K = Keys()
T0 = 1_763_830_000_000
MIN = 60_000
D1 = "d1d1d1d1d1d1"
SPEC = '{"cron":"* * * * *","timezone":"UTC","jitter":0}'


# -- the claim script ----------------------------------------------------------------------------
def line(definition: str) -> str:
    return f"{D1}|all|0|allow|3|0|{definition}"


def minutes(*ns: int) -> list[int]:
    return [T0 + n * MIN for n in ns]


@pytest.fixture
def s(r: redis.Redis) -> Scripts:
    """Job ``a`` published with definition def1 and due at minutes 1, 2, 3; three workers'
    files: ``new`` holds def1, ``old`` another definition of ``a``, ``lacks`` no ``a``."""
    scripts = Scripts(r)
    scripts.publish(K, [("a", "-", line("def1"), SPEC)], generation=1, now_ms=T0)
    scripts.plan(K, [("a", D1, T0 + 10 * MIN, minutes(1, 2, 3))])
    r.hset(K.held("new"), mapping={"a": "def1"})
    r.hset(K.held("old"), mapping={"a": "def0", "b": "def9"})
    r.hset(K.held("lacks"), mapping={"b": "def9"})
    return scripts


def queued(r: redis.Redis) -> list[str]:
    return [str(f) for f in r.zrange(K.queue, 0, -1)]


@pytest.mark.parametrize("held", ["old", "lacks", "nothing-written"])
def test_claim_leaves_fires_of_a_definition_the_worker_does_not_hold(
        s: Scripts, r: redis.Redis, held: str) -> None:
    fires = [fire_id("a", d) for d in minutes(1, 2, 3)]
    res = s.claim(K, held, batch=5, lease_ms=30_000, held=K.held(held),
                  now_ms=T0 + 2 * MIN + 1)
    assert (res.claimed, res.dropped) == ([], [])
    # Left queued at their due times, no attempt used, nothing recorded.
    assert r.zrange(K.queue, 0, -1, withscores=True) == [(f, float(parse_fire(f)[1]))
                                                         for f in fires]
    assert r.hgetall(K.attempts) == {} and r.zcard(K.working) == 0
    assert r.llen(K.events) == 0
    # It comes back for the first fire due later, not at once for the ones it left.
    assert res.next_ms == T0 + 3 * MIN
    # A worker holding the published definition takes them.
    taken = s.claim(K, "new", batch=5, held=K.held("new"), now_ms=T0 + 2 * MIN + 1)
    assert [(c.fire_id, c.token) for c in taken.claimed] == [(f, 1) for f in fires[:2]]


def test_a_fire_no_holder_took_for_unheld_ms_is_dropped_as_not_held(
        s: Scripts, r: redis.Redis) -> None:
    first, *rest = [fire_id("a", d) for d in minutes(1, 2, 3)]
    at_limit = s.claim(K, "old", batch=5, held=K.held("old"), unheld_ms=5 * MIN,
                       now_ms=T0 + 6 * MIN)
    assert (at_limit.claimed, at_limit.dropped) == ([], [])
    past = s.claim(K, "old", batch=5, held=K.held("old"), unheld_ms=5 * MIN,
                   now_ms=T0 + 6 * MIN + 1)
    assert (past.claimed, past.dropped) == ([], [(first, "definition not held")])
    assert queued(r) == rest
    assert r.hgetall(K.attempts) == {}
    event = json.loads(r.lindex(K.events, 0))  # type: ignore[arg-type]
    assert (event["event"], event["fire"], event["reason"]) == (
        "dropped", first, "definition not held")


def test_a_lapsed_lease_of_a_fire_not_held_goes_back_to_the_queue_without_an_attempt(
        s: Scripts, r: redis.Redis) -> None:
    fid = fire_id("a", T0 + MIN)
    [claim] = s.claim(K, "new", batch=1, lease_ms=30_000, held=K.held("new"),
                      now_ms=T0 + MIN).claimed
    assert (claim.fire_id, claim.token) == (fid, 1)
    # Its holder vanished; a worker on another file finds the lapsed lease.
    res = s.claim(K, "old", batch=1, lease_ms=30_000, held=K.held("old"),
                  now_ms=T0 + MIN + 30_001)
    assert (res.claimed, res.dropped) == ([], [])
    assert r.zcard(K.working) == 0 and r.zscore(K.queue, fid) == T0 + MIN
    assert r.hget(K.attempts, fid) == "1"  # the lost attempt, and no other
    event = json.loads(r.lindex(K.events, 0))  # type: ignore[arg-type]
    assert (event["event"], event["fire"], event["reason"]) == (
        "handed back", fid, "lease lapsed; definition not held by old")
    # A holder takes it as the next attempt, and sees whose lease lapsed.
    [again] = s.claim(K, "new2", batch=1, lease_ms=30_000, held=K.held("new"),
                      now_ms=T0 + MIN + 30_002).claimed
    assert (again.fire_id, again.token, again.reclaimed) == (fid, 2, True)
    assert again.before is not None and (again.before["worker"], again.before["token"]) == (
        "new", 1)


@pytest.mark.parametrize(("finder", "verdict"), [("old", "handed back"), ("new", "dead")])
def test_only_a_worker_holding_its_definition_finds_a_lease_lapsed_on_the_last_attempt_dead(
        s: Scripts, r: redis.Redis, finder: str, verdict: str) -> None:
    fid = fire_id("a", T0 + MIN)
    s.claim(K, "new", batch=1, lease_ms=30_000, held=K.held("new"), now_ms=T0 + MIN)
    r.hset(K.attempts, fid, 5)  # max_attempts 3, and the 2 more a lost lease may use
    res = s.claim(K, "finder", batch=1, lease_ms=30_000, held=K.held(finder),
                  now_ms=T0 + MIN + 30_001)
    assert res.claimed == [] and r.zcard(K.working) == 0
    event = json.loads(r.lindex(K.events, 0))  # type: ignore[arg-type]
    assert (event["event"], event["fire"]) == (verdict, fid)
    assert (r.zscore(K.queue, fid), r.zscore(K.dead, fid)) == (
        (T0 + MIN, None) if verdict == "handed back" else (None, T0 + MIN + 30_001))


def test_a_worker_records_a_fire_no_holder_took_in_time_as_missed(
        tmp_path: Path, redis_url: str, r: redis.Redis) -> None:
    new, old = tmp_path / "new.yaml", tmp_path / "old.yaml"
    new.write_text("jobs:\n  a:\n    cron: '0 0 1 1 *'\n    command: ['true']\n")
    old.write_text("jobs:\n  a:\n    cron: '0 0 1 1 *'\n    command: ['false']\n")
    client = Client(redis_url, config=str(new))
    client.publish_config()
    now = client.server_ms()  # past one-offs queued by hand: the Client takes no past time
    late, recent = (fire_id("a", now - ago, new_tag("at")) for ago in (UNHELD_MS + 60_000, 1000))
    for fid in (late, recent):
        Scripts(r).enqueue(K, fid, parse_fire(fid)[1])
    w = Worker(load_config(old), connect(redis_url), worker_id="old")
    w.write_held()
    w.claim_once()
    w.results.close()  # record what the claim dropped, as the results thread does
    [record] = history(r, "a")
    assert (record["fire"], record["status"], record["worker"], record["attempt"]) == (
        late, "missed", "old", None)
    assert record["reason"] == ("missed: no live worker holds this definition of the job "
                                "(their job files differ)")
    assert queued(r) == [recent] and r.hgetall(K.attempts) == {}


# -- worker processes ----------------------------------------------------------------------------
@pytest.fixture
def fleets(tmp_path: Path, redis_url: str) -> Iterator[Any]:
    made: list[Fleet] = []

    def make(name: str) -> Fleet:
        (tmp_path / name).mkdir()
        f = Fleet(tmp_path / name, redis_url, {})
        made.append(f)
        return f

    yield make
    for f in made:
        f.stop_all()


def tagged(f: Fleet, cron: str, tag: str, ledger: str | None = None,
           **options: Any) -> dict[str, Any]:
    """A call job that writes ``tag`` into the ledger: which definition ran."""
    job = f.call_job(cron, call="tests.support.jobs:tagged", **options)
    job["kwargs"].update(tag=tag, path=ledger or f.ledger)
    return job


def starts(path: str, job: str | None = None) -> list[dict[str, Any]]:
    return [e for e in read_ledger(path)
            if e["event"] == "start" and (job is None or e["job"] == job)]


def write_same_stat(path: Path, doc: dict[str, Any]) -> None:
    """Replace the file by one of the same size and mtime: only a SIGHUP can tell."""
    st = path.stat()
    text = yaml.safe_dump(doc, sort_keys=False)
    assert len(text.encode()) == st.st_size
    tmp = path.with_suffix(".next")
    tmp.write_text(text)
    os.utime(tmp, ns=(st.st_atime_ns, st.st_mtime_ns))
    os.replace(tmp, path)


@pytest.mark.slow
def test_a_worker_reloads_its_file_on_change_and_sighup_and_keeps_the_last_good_one(
        fleets: Any, r: redis.Redis) -> None:
    f: Fleet = fleets("w")
    a, b = f.call_job("0 0 1 1 *"), f.call_job("0 0 1 1 *", "tests.support.jobs:tagged")
    b["kwargs"]["tag"] = "b"
    f.write({"a": a})
    f.worker("worker-a")
    wait_for(lambda: r.keys(K.held("*")), message="the worker to write what it holds")

    def reloads() -> int:
        return f.log("worker-a").count("reloaded ")

    f.write({"a": a, "b": b})  # a new job: noticed by the file watch
    wait_for(lambda: reloads() == 1, timeout=10, message="the worker to reload on change")
    assert r.hgetall(K.held(held_digest(load_config(f.config)))) == {
        n: j.definition for n, j in load_config(f.config).jobs.items()}
    f.trigger("b")
    wait_for(lambda: starts(f.ledger, "b"), message="the new job to run")

    write_same_stat(f.config, {"jobs": {"a": a, "c": b}})  # b renamed: the watch sees nothing
    f.signal("worker-a", signal.SIGHUP)
    wait_for(lambda: reloads() == 2, timeout=10, message="the worker to reload on SIGHUP")
    client = f.client()  # the file as it is now: a and c
    f.trigger("c")  # the worker runs c only if it reloaded the file
    wait_for(lambda: starts(f.ledger, "c"), message="the job of the SIGHUP reload to run")

    good = f.config.read_text()
    f.config.write_text(good.replace("0 0 1 1 *", "61 * * * *", 1))  # broken: a's cron
    # The warning and the located problem are two log lines, written one after the other.
    wait_for(lambda: "is invalid; keeping the last good config (2 jobs)" in f.log("worker-a")
             and "jobs.a.cron" in f.log("worker-a"),
             timeout=10, message="the worker to report the broken file and the field")
    client.trigger("a")
    client.trigger("c")
    wait_for(lambda: starts(f.ledger, "a") and len(starts(f.ledger, "c")) == 2,
             message="both jobs to run on the last good file")
    assert reloads() == 2 and f.procs["worker-a"].poll() is None, f.logs()
    assert [e["worker"] for e in starts(f.ledger)] == ["worker-a"] * 4


@pytest.mark.slow
def test_workers_on_an_old_file_leave_new_definitions_to_workers_on_the_new_file(
        fleets: Any, r: redis.Redis, redis_url: str) -> None:
    new, old = fleets("new"), fleets("old")
    ledger = new.ledger
    new.write({"same": tagged(new, "* * * * * *", "both"),
               "changed": tagged(new, "* * * * * *", "new", catch_up="all"),
               "added": tagged(new, "* * * * * *", "new", catch_up="all")})
    old.write({"same": tagged(old, "* * * * * *", "both", ledger),
               "changed": tagged(old, "* * * * * *", "old", ledger, catch_up="all")})
    new.planner()
    old.worker("worker-old")
    wait_for(lambda: len(starts(ledger, "same")) >= 4, message="the old worker to run `same`")
    status = wait_for(lambda: (s := Client(redis_url).status()).workers and s,
                      message="the old worker's presence")
    assert status.worker_gaps == {"worker-old": ["lacks added", "another definition of changed"]}
    assert status.unrunnable == ["added", "changed"]
    assert any(w.startswith("no live worker can run added, changed") for w in status.warnings)
    assert any(w.startswith("worker worker-old's job file differs") for w in status.warnings)
    # Their due fires wait: no attempt used, nothing recorded against them.
    due = [str(f) for f in r.zrangebyscore(K.queue, "-inf", Client(redis_url).server_ms())]
    assert {parse_fire(fid)[0] for fid in due} >= {"changed", "added"}
    assert not [fid for fid in due if r.hexists(K.attempts, fid)]
    assert history(r, "changed") == history(r, "added") == []
    assert not starts(ledger, "changed") and not starts(ledger, "added")

    new_from = Client(redis_url).server_ms()
    new.worker("worker-new")
    for job in ("changed", "added"):
        wait_for(lambda job=job: [e for e in starts(ledger, job)  # type: ignore[misc]
                                  if e["scheduled_ms"] > new_from + 2000],
                 message=f"the new worker to run `{job}`")
    status = Client(redis_url).status()
    assert status.unrunnable == [] and list(status.worker_gaps) == ["worker-old"]
    new.stop_all()
    old.stop_all()

    runs = starts(ledger)
    assert [f for f, n in collections.Counter(e["fire"] for e in runs).items() if n > 1] == []
    for job in ("changed", "added"):
        mine = starts(ledger, job)
        assert {(e["worker"], e["tag"], e["attempt"]) for e in mine} == {("worker-new", "new", 1)}
        dues = sorted(e["scheduled_ms"] for e in mine)
        # Every fire from the publish on ran, those that waited for the new worker included.
        assert dues[0] < new_from - 2000, (job, dues[0], new_from)
        assert dues == list(range(dues[0], dues[-1] + 1000, 1000)), job
        assert {h["status"] for h in history(r, job)} == {"ok"}
    assert {e["tag"] for e in starts(ledger, "same")} == {"both"}


@pytest.mark.slow
def test_a_dead_fire_names_its_last_error(fleets: Any, r: redis.Redis, redis_url: str) -> None:
    f: Fleet = fleets("dead")
    f.write({"broken": {"cron": "0 0 1 1 *", "command": ["sh", "-c", "echo boom; exit 3"],
                        "retries": 1, "backoff": 0.05}})
    f.worker("worker-a")
    fid = f.trigger("broken")
    wait_for(lambda: r.zscore(K.dead, fid) is not None, message="the fire to be dead")
    [dead] = Client(redis_url).dead()
    assert (dead.fire, dead.attempts) == (fid, 2)
    assert dead.last is not None and dead.last["reason"] == "no attempts left: exit code 3"
    assert [(h["status"], h["reason"]) for h in history(r, "broken")] == [
        ("failed", "exit code 3"), ("failed", "exit code 3"),
        ("dead", "no attempts left: exit code 3")]
    out = CliRunner().invoke(main, ["dead", "--redis-url", redis_url])
    assert out.exit_code == 0, out.output
    assert fid in out.output and "no attempts left: exit code 3" in out.output
