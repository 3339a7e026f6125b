"""RQ jobs scheduled by cronsvc, with a real ``rq worker`` (job class
:class:`cronsvc.contrib.rq.GuardedJob`): each fire is one RQ job whose id is the fire id,
run once, its outcome in cronsvc's history; a failing job is retried, dead, told and
paused as a ``call`` job is; a dispatcher killed after its send sends again and RQ
refuses the copy; RQ's Redis down for a while delays fires and loses none."""

from __future__ import annotations

import json
import re
import signal
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest
import redis

from cronsvc import testing
from cronsvc.clock import SYSTEM
from cronsvc.fires import parse_fire
from cronsvc.keys import Keys
from cronsvc.process.redis_server import RedisServer
from cronsvc.run.dispatch import safe_id
from cronsvc.testing import Fleet, history, published
from tests.support.parts import missing
from tests.support.queues import read_runs, rq_worker
from tests.support.receivers import HttpReceiver, http_receiver
from tests.support.wait import wait_for

pytestmark = pytest.mark.slow

FAR = "0 0 1 1 *"  # a job only triggered


@pytest.fixture(autouse=True)
def _rq() -> None:
    try:
        import rq  # noqa: F401
    except ImportError:
        missing("RQ is not installed: pip install 'cronsvc[rq]'")


@pytest.fixture
def hooks() -> Iterator[HttpReceiver]:
    with http_receiver() as receiver:
        yield receiver


def rq_url_of(redis_url: str) -> str:
    """RQ's Redis: database 1 of the test's Redis (cronsvc's keys are on 0)."""
    return redis_url.rsplit("/", 1)[0] + "/1"


def target(url: str, func: str, *args: Any, **kwargs: Any) -> dict[str, Any]:
    return {"func": f"tests.support.rq_jobs.{func}", "redis": url, "args": list(args),
            "kwargs": kwargs}


def ok_records(r: redis.Redis, job: str) -> dict[str, dict[str, Any]]:
    return {h["fire"]: h for h in history(r, job) if h["status"] == "ok"}


def test_every_second_each_fire_runs_once_as_the_rq_job_of_its_id(
        tmp_path: Path, redis_url: str, r: redis.Redis) -> None:
    url, ledger = rq_url_of(redis_url), tmp_path / "runs.jsonl"
    fleet = Fleet(tmp_path, redis_url, {"digest": {
        "every": "1s", "timeout": "30s", "rq": target(url, "digest", "core", size=3)}})
    with rq_worker(tmp_path, url, redis_url, ledger), fleet.running("w1", "w2"):
        fid = published(redis_url, fleet.config).trigger("digest", {"team": "ops"})
        wait_for(lambda: len(ok_records(r, "digest")) >= 9 and fid in ok_records(r, "digest"),
                 timeout=60, message="eight fires and a triggered one recorded ok")
    runs = read_runs(ledger)
    assert max(Counter(run["fire"] for run in runs).values()) == 1
    assert all(run["job_id"] == safe_id(run["fire"]) for run in runs)
    assert all((run["team"], run["size"]) == ("core", 3) for run in runs)
    assert [run["payload"] for run in runs if run["fire"] == fid] == [{"team": "ops"}]
    ok = ok_records(r, "digest")
    assert set(ok) <= {run["fire"] for run in runs}
    assert "'digest for core'" in ok[fid]["output"]
    assert f"sent {fid} (delivery of attempt 1): job {safe_id(fid)} enqueued on default" in (
        ok[fid]["output"])


def test_a_job_declared_in_python_via_rq_runs_in_the_rq_worker(
        tmp_path: Path, redis_url: str, r: redis.Redis) -> None:
    url, ledger, code = rq_url_of(redis_url), tmp_path / "runs.jsonl", tmp_path / "code"
    code.mkdir()
    # The module declares the job; the function RQ runs is one its worker imports.
    (code / "queued.py").write_text(
        "import cronsvc\nfrom tests.support.rq_jobs import digest\n\n"
        f"cronsvc.job(every='1s', via='rq', redis={url!r}, args=['core'])(digest)\n")
    fleet = Fleet(tmp_path, redis_url, {}, pythonpath=[code], discover=["queued"])
    with rq_worker(tmp_path, url, redis_url, ledger), fleet.running("w1"):
        wait_for(lambda: len(ok_records(r, "digest")) >= 3, timeout=60,
                 message=f"three fires recorded ok\n{fleet.logs()}")
    runs = read_runs(ledger)
    assert max(Counter(run["fire"] for run in runs).values()) == 1
    assert all(run["job_id"] == safe_id(run["fire"]) and run["team"] == "core"
               for run in runs)
    assert set(ok_records(r, "digest")) <= {run["fire"] for run in runs}


def test_a_failing_job_is_retried_dead_told_and_paused_as_a_call_job_is(
        tmp_path: Path, redis_url: str, r: redis.Redis, hooks: HttpReceiver) -> None:
    url, ledger = rq_url_of(redis_url), tmp_path / "runs.jsonl"
    fleet = Fleet(tmp_path, redis_url, {"broken": {
        "cron": FAR, "timeout": "30s", "retries": 1, "backoff": "0.1s",
        "notify": ["ops"], "notify_on": ["failed", "dead"], "pause_after_failures": 1,
        "rq": target(url, "broken", "ops")}},
        notify={"ops": {"webhook": f"{hooks.url}/ops"}},
        notifier={"retry": "50ms", "retry_max": "200ms", "fold": "1h"})
    with rq_worker(tmp_path, url, redis_url, ledger), fleet.running("w1"):
        client = published(redis_url, fleet.config)
        fid = client.trigger("broken")
        told = lambda: [json.loads(x.body)["event"] for x in hooks.received]  # noqa: E731
        wait_for(lambda: {"failed", "dead", "paused"} <= set(told()), timeout=60,
                 message="failed, dead and paused told")
        assert client.fire_state(fid) == "dead" and client.job("broken").paused
    records = [h for h in history(r, "broken") if h["fire"] == fid]
    assert [(h["attempt"], h["status"]) for h in records] == [
        (1, "failed"), (2, "failed"), (2, "dead")]
    failed = records[:2]
    assert {h["reason"] for h in failed} == {"RuntimeError: no digest for ops"}
    # The record keeps an excerpt; the fire's whole output is kept beside it.
    whole = [a for a in client.fire(fid).attempts if a["status"] == "failed"]
    assert "in place of an earlier delivery (failed)" in whole[1]["output"]
    assert [(run["fire"], run["attempt"]) for run in read_runs(ledger)] == [(fid, 1), (fid, 2)]


def test_a_dispatcher_killed_after_its_send_sends_again_and_rq_refuses_the_copy(
        tmp_path: Path, redis_url: str, r: redis.Redis,
        fresh_server: Callable[..., RedisServer]) -> None:
    # RQ's Redis of its own: the clients on it are the test's and cronsvc's senders.
    rq_redis, ledger = fresh_server(), tmp_path / "runs.jsonl"
    fleet = Fleet(tmp_path, redis_url, {"digest": {
        "cron": FAR, "timeout": "60s", "retries": 2, "rq": target(rq_redis.url, "digest", "a")}})
    watch = redis.Redis.from_url(rq_redis.url, decode_responses=True)
    job_id = ""
    try:
        fleet.planner()
        fleet.worker("w1", "--lease", "1")
        fid = published(redis_url, fleet.config).trigger("digest")
        job_id = safe_id(fid)
        wait_for(lambda: watch.lrange("rq:queue:default", 0, -1) == [job_id],
                 message="the first send in RQ's queue")
        fleet.signal("w1", signal.SIGKILL)
        fleet.wait("w1")
        before = {c["id"] for c in watch.client_list()}
        fleet.worker("w2", "--lease", "1")
        # w2 connects as it starts (a ping, to have a connection ready): its send is the
        # first other command of a new client.
        wait_for(lambda: {c["id"] for c in watch.client_list() if c["cmd"] != "ping"} - before,
                 message="w2 sending the fire again")
        with rq_worker(tmp_path, rq_redis.url, redis_url, ledger):
            record = wait_for(lambda: ok_records(r, "digest").get(fid), timeout=60,
                              message="the fire's outcome")
    finally:
        fleet.stop_all()
        watch.close()
    assert record["worker"] == "w2"
    assert f"job {job_id} already held by RQ (it refused a second)" in record["output"]
    assert [run["fire"] for run in read_runs(ledger)] == [fid]


def test_rq_s_redis_down_delays_fires_loses_none_and_sends_each_once(
        tmp_path: Path, redis_url: str, r: redis.Redis,
        fresh_server: Callable[..., RedisServer]) -> None:
    rq_redis, ledger = fresh_server(), tmp_path / "runs.jsonl"
    fleet = Fleet(tmp_path, redis_url, {"digest": {
        "every": "1s", "timeout": "60s", "rq": target(rq_redis.url, "digest", "core")}})
    with ExitStack() as stack:
        consumer = stack.enter_context(rq_worker(tmp_path, rq_redis.url, redis_url, ledger))
        stack.enter_context(fleet.running())
        fleet.worker("w1", "--concurrency", "16")
        fleet.worker("w2", "--concurrency", "16")
        wait_for(lambda: len(ok_records(r, "digest")) >= 2, timeout=60, message="two fires ok")
        rq_redis.stop()
        down_ms = SYSTEM.now_ms()
        # Down for ten seconds of fires: each one begun, waiting for RQ's Redis.
        wait_for(lambda: len(begun_since(r, down_ms)) >= 10, timeout=60,
                 message="ten fires waiting for RQ's Redis")
        up_ms = SYSTEM.now_ms()
        rq_redis.start()
        if consumer.proc.poll() is not None:
            # `rq worker` gives up on a Redis gone longer than its own retries (a slow
            # machine stretches the outage): started again, as its supervisor would.
            stack.enter_context(rq_worker(tmp_path, rq_redis.url, redis_url, ledger,
                                          name="rq-again"))
        # None lost: every second from the first fire to RQ's Redis coming back is
        # recorded ok in the end (fires due later may still be on their way).
        try:
            testing.wait_for(lambda: not gaps(ok_records(r, "digest"), up_ms), 90, 0.05,
                             "every fire due until RQ's Redis was back recorded ok")
        except testing.WaitTimeout:
            pytest.fail(f"not recorded ok: {gaps(ok_records(r, 'digest'), up_ms)}; history: "
                        f"{[(h['fire'], h['status']) for h in history(r, 'digest')][:40]}")
    ok = ok_records(r, "digest")
    waited = sorted((f for f in ok if down_ms <= due(f) < up_ms), key=due)
    assert len(waited) >= 10
    runs = Counter(run["fire"] for run in read_runs(ledger))
    assert all(runs[f] == 1 for f in ok) and max(runs.values()) == 1
    for f in waited:  # each went out once RQ's Redis was back: its lag says so
        lag = re.search(r"enqueued on default, (\d+) ms after its time", ok[f]["output"])
        assert lag and int(lag.group(1)) >= up_ms - due(f), ok[f]["output"]


def due(fire: str) -> int:
    return parse_fire(fire)[1]


def gaps(ok: dict[str, dict[str, Any]], until_ms: int) -> list[int]:
    """The seconds of an every-second job, from its first fire recorded ok to ``until_ms``,
    with no fire recorded ok (due times, ms)."""
    dues = {due(f) for f in ok}
    if not dues:
        return [until_ms]
    first = min(dues)
    return [t for t in range(first, until_ms - 999, 1000) if t not in dues]


def begun_since(r: redis.Redis, since_ms: int) -> set[str]:
    """The fires of ``digest`` due since ``since_ms`` whose delivery has begun."""
    prefix = Keys().deliveries("")
    found = {str(k)[len(prefix):] for k in r.scan_iter(f"{prefix}digest@*", count=1000)}
    return {f for f in found if due(f) >= since_ms}
