"""A Redis ACL user with only cronsvc.store.acl.REQUIRED_COMMANDS, on cronsvc's keys and channels,
runs every part of cronsvc: scripts (their inner commands are checked against the ACL too),
planner, worker and client."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import redis

from cronsvc.client.client import Client
from cronsvc.config.models import load_config
from cronsvc.errors import RedisUnavailable
from cronsvc.fires import fire_id
from cronsvc.keys import Keys
from cronsvc.planner.planner import Planner
from cronsvc.process.redis_server import RedisServer
from cronsvc.store.acl import REQUIRED_COMMANDS, acl_line, acl_setuser_args, key_patterns
from cronsvc.store.connection import connect, mask_url
from cronsvc.store.loader import load_sources
from cronsvc.store.scripts import Scripts
from cronsvc.worker.worker import Worker
from tests.support.paths import ROOT
from tests.support.wait import wait_for

T0 = 1_763_830_000_000
D1 = "d1d1d1d1d1d1"
K = Keys()
JOBS = """
jobs:
  tick:
    cron: "0 0 1 1 *"
    call: "tests.support.calls:nothing"
"""


@pytest.fixture
def acl_server(fresh_server: Callable[..., RedisServer]) -> Iterator[RedisServer]:
    server = fresh_server()
    with redis.Redis(port=server.port) as admin:
        admin.execute_command("ACL", "SETUSER", *acl_setuser_args("cronsvc", "s3cret"))
    yield server


def user_url(server: RedisServer, password: str = "s3cret") -> str:
    return f"redis://cronsvc:{password}@127.0.0.1:{server.port}/0"


def test_the_user_is_restricted(acl_server: RedisServer) -> None:
    client = connect(user_url(acl_server))
    with pytest.raises(redis.exceptions.NoPermissionError):
        client.flushall()
    with pytest.raises(redis.exceptions.NoPermissionError):
        client.hset("other:key", "a", "1")
    with pytest.raises(redis.exceptions.NoPermissionError):
        client.publish("other-channel", "x")
    assert client.hset(K.paused, "a", "{}") == 1


def test_every_script_runs_as_the_user(acl_server: RedisServer) -> None:
    s = Scripts(connect(user_url(acl_server)))
    policy = f"{D1}|all|0|forbid|2|0"
    assert s.publish(K, [("a", "-", policy, "{}"), ("b", "-", policy, "{}")], generation=1,
                     now_ms=T0).changed
    dues = [T0 + 1000, T0 + 2000, T0 + 3000]
    assert s.plan(K, [("a", D1, T0 + 3000, dues), ("b", D1, T0 + 3000, dues[:1])]).added == 4
    s.client.hset(K.paused, "b", json.dumps({"note": "", "since": T0}))
    res = s.claim(K, "w", batch=2, lease_ms=1000, scan_limit=10, now_ms=T0 + 2000)
    assert [c.fire_id for c in res.claimed] == [fire_id("a", T0 + 1000)]
    assert sorted(res.dropped) == [(fire_id("a", T0 + 2000), "overlap forbid"),
                                   (fire_id("b", T0 + 1000), "paused")]
    (claim,) = res.claimed
    assert s.heartbeat(K, 1000, [(claim.fire_id, claim.token)], now_ms=T0 + 2000) == [1]
    s.record(K, "b", {"fire": fire_id("b", T0 + 1000), "status": "skipped"})
    # The lease runs out: a reclaim, then a failed attempt requeued, then dead.
    again = s.claim(K, "w2", lease_ms=1000, now_ms=T0 + 3500).claimed[0]
    assert (again.fire_id, again.reclaimed) == (claim.fire_id, True)
    assert s.fail(K, again.fire_id, again.token, "a", {"status": "failed"}, 10, 2,
                  T0 + 4000, now_ms=T0 + 3600).verdict == "dead"
    (late,) = s.claim(K, "w3", now_ms=T0 + 4000).claimed
    s.ack(K, late.fire_id, late.token, "a", {"status": "ok"})
    trig = fire_id("a", T0 + 5000, "tabcdefg")
    assert s.enqueue(K, trig, T0 + 5000, {"n": 1})
    assert s.cancel(K, trig, now_ms=T0 + 4000)
    assert s.enqueue(K, trig, T0 + 5000, {"n": 2})
    (got,) = s.claim(K, "w3", now_ms=T0 + 5000).claimed
    assert (got.fire_id, got.payload) == (trig, {"n": 2})
    assert s.release(K, [(got.fire_id, got.token)]) == 1
    (got,) = s.claim(K, "w3", now_ms=T0 + 5000).claimed
    assert s.ack_many(K, [(got.fire_id, got.token, "a", {"status": "ok"})]) == [True]
    with redis.Redis(port=acl_server.port) as admin:
        assert admin.llen(K.history("a")) == 4  # failed, dead, ok, ok
        # A restart (or SCRIPT FLUSH) empties the script cache: the user may load them again.
        admin.script_flush()
    assert s.claim(K, "w4", now_ms=T0 + 5000).claimed == []


def test_planner_worker_and_client_run_as_the_user(acl_server: RedisServer,
                                                   tmp_path: Path) -> None:
    path = tmp_path / "schedules.yaml"
    path.write_text(JOBS)
    url = user_url(acl_server)
    planner = Planner(path, connect(url))
    planner.tick()  # publish, plan, presence
    worker = Worker(load_config(path), connect(url), concurrency=1, grace=5)
    thread = threading.Thread(target=worker.run_forever, daemon=True)
    thread.start()
    try:
        client = Client(client=connect(url), config=load_config(path))
        client.pause("tick", note="acl test")
        assert client.resume("tick")
        fid = client.trigger("tick", {"via": "acl"})
        # runtime schedules: created, then changed (read first)
        assert client.upsert_schedules([{"id": "s", "job": "tick", "every": "1h"}]) == [
            "created"]
        assert client.upsert_schedule("s", job="tick", every="2h") == "changed"
        with redis.Redis(port=acl_server.port, decode_responses=True) as admin:
            records = wait_for(lambda: admin.lrange(K.history("tick"), 0, -1),
                               message="the triggered run in the history")
            assert [(json.loads(r)["fire"], json.loads(r)["status"]) for r in records] == [
                (fid, "ok")]
            assert admin.zcard(K.planners) == 1
            wait_for(lambda: admin.zcard(K.workers) == 1, message="the worker's presence")
        # The operator's read commands work as the same user.
        assert [j.name for j in client.jobs()] == ["tick"]
        assert [h["fire"] for h in client.history("tick")] == [fid]
        assert client.queue().in_flight == [] and client.dead() == []
        status = client.status()
        assert status.redis_version and status.aof is True and len(status.workers) == 1
    finally:
        worker.stop()
        thread.join(30)
    planner.unregister()
    assert not thread.is_alive()


def test_wrong_password_is_one_masked_line(acl_server: RedisServer) -> None:
    url = user_url(acl_server, "wrong-pw")
    with pytest.raises(RedisUnavailable) as err:
        connect(url)
    assert str(err.value) == (f"cannot reach Redis at {mask_url(url)}: "
                              "invalid username-password pair or user is disabled.")
    assert mask_url(url) == f"redis://cronsvc:***@127.0.0.1:{acl_server.port}/0"


def test_every_command_of_the_scripts_is_allowed() -> None:
    used = {m.lower() for src in load_sources().values()
            # redis.call itself, and the helpers that call it with the command they are given
            for m in re.findall(r"(?:redis\.p?call|bulk|read_all)\(\s*'([A-Za-z]+)'",
                                src.text)}
    assert used and used <= set(REQUIRED_COMMANDS)


def test_docs_show_the_acl_line() -> None:
    docs = (ROOT / "docs" / "redis.md").read_text()
    assert acl_line("cronsvc", "CHANGE-ME") in docs
    assert acl_line("cronsvc", "CHANGE-ME", cluster=True) in docs
    assert key_patterns() == ["~cron:*", "~scheduler:*"]
