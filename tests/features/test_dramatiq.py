"""dramatiq actors scheduled by cronsvc, with a real ``dramatiq`` worker on a Redis broker of
the test's own: each fire is one message whose id is the fire id, run once, its outcome in
cronsvc's history; a failing actor goes the way of a failing ``call`` job; a dispatcher
killed between its send and its ack has the message sent again and run once; a broker
down for ten seconds delays fires and loses none."""

from __future__ import annotations

import importlib.util
import json
import signal
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from cronsvc.fires import parse_fire
from cronsvc.keys import Keys
from cronsvc.process.redis_server import RedisServer
from cronsvc.testing import Fleet, history
from tests.support.parts import missing
from tests.support.queues import dramatiq_worker, read_runs
from tests.support.receivers import HttpReceiver, http_receiver
from tests.support.wait import wait_for

pytestmark = pytest.mark.slow


@pytest.fixture
def broker(fresh_server: Callable[..., RedisServer]) -> RedisServer:
    """The dramatiq broker: a redis-server of the test's own, so it can be stopped."""
    if importlib.util.find_spec("dramatiq") is None:
        missing("dramatiq is not installed: pip install 'cronsvc[dramatiq]'")
    return fresh_server()


def runs(ledger: Path, fire: str | None = None) -> list[dict[str, Any]]:
    """The actors' runs the ledger notes (of one fire, if given)."""
    return [x for x in read_runs(ledger) if "task" in x and fire in (None, x["fire"])]


def received(ledger: Path) -> Counter[str]:
    """How many times the worker received each message, by message id."""
    return Counter(x["received"] for x in read_runs(ledger) if "received" in x)


def done(ledger: Path, fire: str) -> list[bool]:
    """Each copy of a fire's message the worker is done with: skipped, or not (it ran)."""
    return [x["skipped"] for x in read_runs(ledger) if x.get("done") == fire]


def digest(broker: RedisServer, **job: Any) -> dict[str, Any]:
    return {"timeout": "60s", **job, "dramatiq": {
        "actor": "digest", "broker": broker.url, "args": ["core"], "kwargs": {"size": 3}}}


def last_state(r: redis.Redis, fire: str) -> str | None:
    """Where a fire's deliveries stand (``lua/dispatch-1.lua``)."""
    found = r.xrevrange(Keys().deliveries(fire), count=1)
    return found[0][1]["state"] if found else None


def sending(r: redis.Redis, job: str, after_ms: int) -> set[str]:
    """The fires of ``job`` due after ``after_ms`` whose delivery is not sent yet."""
    prefix = Keys().deliveries(f"{job}@")
    fires = (key[len(prefix) - len(job) - 1:] for key in r.scan_iter(f"{prefix}*"))
    return {f for f in fires
            if parse_fire(f)[1] > after_ms and last_state(r, f) == "sending"}


def test_every_second_fires_arrive_once_and_a_broker_outage_loses_none(
        tmp_path: Path, redis_url: str, r: redis.Redis, broker: RedisServer) -> None:
    ledger = tmp_path / "runs.jsonl"
    fleet = Fleet(tmp_path, redis_url, {"digest": digest(broker, every="1s", catch_up="all")})
    ok = lambda: {h["fire"]: h for h in history(r, "digest") if h["status"] == "ok"}  # noqa: E731
    with dramatiq_worker(tmp_path, broker.url, redis_url, ledger) as consumer:
        fleet.planner()
        for name in ("w1", "w2"):
            fleet.worker(name, "-c", "16")
        try:
            wait_for(lambda: len(ok()) >= 4, timeout=60, message="four fires recorded ok")
            with_payload = fleet.client().trigger("digest", {"team": "ops"})
            wait_for(lambda: with_payload in ok(), timeout=30, message="the triggered fire ok")
            # The broker goes down; ten fires come due and wait, each sending again and
            # again to a broker that refuses.
            down_ms = int(r.time()[0]) * 1000
            broker.stop()
            wait_for(lambda: len(sending(r, "digest", down_ms)) >= 10, timeout=60,
                     message="ten fires waiting for the broker")
            outage = sending(r, "digest", down_ms)
            broker.start()
            wait_for(lambda: outage <= set(ok()), timeout=90,
                     message="the fires of the outage sent and recorded ok")
        finally:
            fleet.stop_all()
        assert "Traceback" not in consumer.log()
    ran = runs(ledger)
    assert max(Counter(run["fire"] for run in ran).values()) == 1
    assert max(received(ledger).values()) == 1  # each sent once, outage or not
    assert all(run["team"] == "core" and run["size"] == 3 for run in ran)
    records = ok()
    assert set(records) <= {run["fire"] for run in ran}
    assert {run["fire"] for run in ran if run["payload"] == {"team": "ops"}} == {with_payload}
    messages = {x["received"]: x["options"] for x in read_runs(ledger) if "received" in x}
    assert all(messages[fire]["fire_id"] == fire for fire in records)
    some = records[with_payload]
    assert "digest for core" in some["output"] and f"sent {with_payload}" in some["output"]
    # The wait shows in the record: none of the outage's fires ended before the broker
    # was back, however early they started.
    assert all(records[f]["started"] + records[f]["duration_ms"] > down_ms for f in outage)
    assert not [h for h in history(r, "digest") if h["status"] != "ok"]
    due = sorted(parse_fire(fire)[1] for fire in records if fire != with_payload)
    assert due == list(range(due[0], due[-1] + 1000, 1000))  # none lost in between


@pytest.fixture
def hooks() -> Iterator[HttpReceiver]:
    with http_receiver() as receiver:
        yield receiver


def test_a_failing_actor_fails_dies_notifies_and_pauses_its_job(
        tmp_path: Path, redis_url: str, r: redis.Redis, broker: RedisServer,
        hooks: HttpReceiver) -> None:
    ledger = tmp_path / "runs.jsonl"
    fleet = Fleet(tmp_path, redis_url, {"broken": {
        "cron": "0 0 1 1 *", "timeout": "30s", "retries": 1, "backoff": "1s",
        "pause_after_failures": 2, "notify": ["ops"],
        "dramatiq": {"actor": "broken", "broker": broker.url, "args": ["ops"]}}},
        notify={"ops": {"webhook": f"{hooks.url}/ops"}},
        notifier={"retry": "50ms", "retry_max": "200ms", "fold": "1h"})
    told = lambda: [json.loads(x.body)["event"] for x in hooks.received]  # noqa: E731
    with dramatiq_worker(tmp_path, broker.url, redis_url, ledger), fleet.running("w1"):
        client = fleet.client()
        client.publish_config()
        fires = [client.trigger("broken")]
        wait_for(lambda: "dead" in told(), timeout=60, message="the death of the fire told")
        fires.append(client.trigger("broken"))
        wait_for(lambda: "paused" in told(), timeout=60, message="the pause told")
        job = client.job("broken")
    assert job.paused and job.pause_note == "auto: 2 fires failed in a row"
    statuses = [(h["fire"], h["status"], h["attempt"]) for h in history(r, "broken")]
    assert [s for s in statuses if s[1] == "failed"] == [
        (fire, "failed", attempt) for fire in fires for attempt in (1, 2)]
    assert {s[0] for s in statuses if s[1] == "dead"} == set(fires)
    failed = [h for h in history(r, "broken") if h["status"] == "failed"]
    assert all(h["reason"] == "RuntimeError: no digest for ops" for h in failed)
    # The record keeps an excerpt; the fire's whole output is kept beside it.
    whole = [a for a in client.fire(fires[0]).attempts if a["status"] == "failed"]
    assert "Traceback" in whole[0]["output"]
    # Each attempt ran once: dramatiq did not retry what cronsvc retries.
    assert sorted((x["fire"], x["attempt"]) for x in runs(ledger)) == [
        (fire, attempt) for fire in fires for attempt in (1, 2)]
    assert received(ledger) == Counter({fire: 2 for fire in fires})


def test_a_dispatcher_killed_between_send_and_ack_has_it_sent_again_and_run_once(
        tmp_path: Path, redis_url: str, r: redis.Redis, broker: RedisServer) -> None:
    ledger = tmp_path / "runs.jsonl"
    fleet = Fleet(tmp_path, redis_url, {"digest": digest(broker, cron="0 0 1 1 *")})
    queue = redis.Redis.from_url(broker.url)
    try:
        fleet.worker("w1", "--lease", "2s")
        fire = fleet.trigger("digest")
        wait_for(lambda: last_state(r, fire) == "sent", timeout=30, message="the fire sent")
        fleet.signal("w1", signal.SIGKILL)
        fleet.wait("w1")
        # No dramatiq worker yet: the message waits in the broker for the next holder.
        fleet.worker("w2", "--lease", "2s")
        wait_for(lambda: queue.hlen("dramatiq:default.msgs") == 2, timeout=30,
                 message="the message sent again")
        sent = [json.loads(m) for m in queue.hvals("dramatiq:default.msgs")]
        assert [m["message_id"] for m in sent] == [fire, fire]
        assert [m["options"]["cronsvc"]["attempt"] for m in sent] == [1, 1]
        with dramatiq_worker(tmp_path, broker.url, redis_url, ledger):
            wait_for(lambda: any(h["status"] == "ok" for h in history(r, "digest")),
                     timeout=60, message="the fire recorded ok")
            wait_for(lambda: len(done(ledger, fire)) == 2, timeout=30,
                     message="both copies done with")
    finally:
        fleet.stop_all()
        queue.close()
    assert len(runs(ledger, fire)) == 1 and sorted(done(ledger, fire)) == [False, True]
    [ok] = [h for h in history(r, "digest") if h["status"] == "ok"]
    assert ok["attempt"] == 2 and f"resent {fire} (delivery of attempt 1)" in ok["output"]
