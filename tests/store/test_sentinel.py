"""redis+sentinel:// URLs against a real sentinel (redis-server --sentinel) and its master."""

from __future__ import annotations

import signal
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import redis

from cronsvc.errors import RedisUnavailable
from cronsvc.fires import fire_id
from cronsvc.keys import Keys
from cronsvc.process.redis_server import RedisServer
from cronsvc.store.connection import connect, mask_url
from cronsvc.store.scripts import Scripts
from cronsvc.testing import Fleet, read_ledger
from tests.support.cluster import SentinelServer
from tests.support.servers import server_binary
from tests.support.wait import server_ms, wait_for

T0 = 1_763_830_000_000
D1 = "d1d1d1d1d1d1"


@pytest.fixture
def sentinel(tmp_path: Path, fresh_server: Callable[..., RedisServer]) -> Iterator[SentinelServer]:
    master = fresh_server()
    with redis.Redis(port=master.port) as admin:
        admin.config_set("requirepass", "masterpw")  # after startup: RedisServer pings without auth
    watcher = SentinelServer(tmp_path / "sentinel", master, binary=server_binary(),
                             password="sentpw", master_password="masterpw")
    try:
        yield watcher.start()
    finally:
        watcher.stop()


def test_connect_through_the_sentinel_and_run_scripts(sentinel: SentinelServer) -> None:
    url = f"redis+sentinel://:masterpw@127.0.0.1:{sentinel.port}/cronsvc/0?sentinel_password=sentpw"
    client = connect(url)
    s = Scripts(client)
    k = Keys()
    s.publish(k, [("a", "-", f"{D1}|all|0|allow|3|0", "{}")], generation=1, now_ms=T0)
    assert s.plan(k, [("a", D1, T0 + 1000, [T0 + 1000])]).added == 1
    (claim,) = s.claim(k, "w", now_ms=T0 + 1000).claimed
    assert claim.fire_id == fire_id("a", T0 + 1000)
    assert s.ack_many(k, [(claim.fire_id, claim.token, "a", {"status": "ok"})]) == [True]
    # It is the monitored master that holds the data.
    with redis.Redis(port=sentinel.master.port, password="masterpw", decode_responses=True) as m:
        assert m.llen(k.history("a")) == 1


@pytest.mark.parametrize("query, service, why", [
    ("?sentinel_password=wrong", "cronsvc", "invalid username-password pair"),
    ("?sentinel_password=sentpw", "nosuch", "No such master with that name"),
])
def test_sentinel_errors_are_one_masked_line(sentinel: SentinelServer, query: str, service: str,
                                             why: str) -> None:
    url = f"redis+sentinel://:masterpw@127.0.0.1:{sentinel.port}/{service}{query}"
    with pytest.raises(RedisUnavailable) as err:
        connect(url, timeout=2.0)
    message = str(err.value)
    assert message.startswith(f"cannot reach Redis at {mask_url(url)}: no master for service "
                              f"{service!r} (sentinel 127.0.0.1:{sentinel.port}: {why}")
    assert "\n" not in message
    assert "masterpw" not in message and "sentpw" not in message and "wrong" not in message


def test_wrong_master_password_through_the_sentinel(sentinel: SentinelServer) -> None:
    url = f"redis+sentinel://:nope@127.0.0.1:{sentinel.port}/cronsvc?sentinel_password=sentpw"
    with pytest.raises(RedisUnavailable) as err:
        connect(url, timeout=2.0)
    assert str(err.value) == (f"cannot reach Redis at {mask_url(url)}: "
                              "invalid username-password pair or user is disabled.")


@pytest.mark.slow
def test_the_fleet_follows_a_failover_away_from_a_master_that_stopped_answering(
        tmp_path: Path, fresh_server: Callable[..., RedisServer]) -> None:
    # A master that accepts connections and answers nothing (frozen, cut off by a partition,
    # its host gone dark) resets nothing: without a reply timeout the planner and the worker
    # would wait on it for ever, and never ask the sentinel where the new master is.
    master, replica = fresh_server(), fresh_server()
    with redis.Redis(port=replica.port, decode_responses=True) as r:
        r.replicaof("127.0.0.1", master.port)
        wait_for(lambda: r.info("replication")["master_link_status"] == "up",
                 message="the replica to sync")
    watcher = SentinelServer(tmp_path / "sentinel", master, binary=server_binary(),
                             down_after_ms=1000)
    watcher.start()
    admin = redis.Redis(port=watcher.port, decode_responses=True)
    try:
        wait_for(lambda: admin.sentinel_slaves("cronsvc"),
                 message="the sentinel to see the replica")
        f = Fleet(tmp_path, f"redis+sentinel://127.0.0.1:{watcher.port}/cronsvc", {})
        f.write({"tick": f.call_job("* * * * * *")})
        with f.running("worker-a"):
            wait_for(lambda: read_ledger(f.ledger), timeout=30, message="a first run")
            assert master.proc is not None
            master.proc.send_signal(signal.SIGSTOP)
            try:
                wait_for(lambda: admin.sentinel_get_master_addr_by_name("cronsvc")[1]
                         == replica.port, timeout=60, message="the sentinel to fail over")
                with redis.Redis(port=replica.port, decode_responses=True) as r:
                    promoted = server_ms(r)
                wait_for(lambda: any(e["scheduled_ms"] > promoted for e in read_ledger(f.ledger)),
                         timeout=60, message=f"a fire due after the failover to run:\n{f.logs()}")
            finally:
                master.proc.send_signal(signal.SIGCONT)
    finally:
        admin.close()
        watcher.stop()
