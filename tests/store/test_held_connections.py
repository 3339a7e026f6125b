"""Scripts that hold a connection per thread for their packed calls (a worker's claim loop
and results thread): one connection a thread, whatever the calls, and a connection lost
is replaced by the next call."""

from __future__ import annotations

import threading
from collections.abc import Callable

import redis

from cronsvc.keys import Keys
from cronsvc.process.redis_server import RedisServer
from cronsvc.store.scripts import Scripts

K = Keys()


def _names(r: redis.Redis) -> list[str]:
    return [c["name"] for c in r.client_list() if c["name"].startswith("held-")]


def test_each_thread_claims_on_its_own_connection(fresh_server: Callable[..., RedisServer]
                                                  ) -> None:
    server = fresh_server()
    client = redis.Redis.from_url(server.url, decode_responses=True, client_name="held-0")
    admin = redis.Redis.from_url(server.url, decode_responses=True)
    s = Scripts(client, hold=True)
    s.claim(K, "w", batch=5)  # the held one, and the pool's that loaded the script
    assert len(_names(admin)) == 2
    for _ in range(20):
        assert s.claim(K, "w", batch=5).claimed == []
    assert len(_names(admin)) == 2
    assert len(client.connection_pool._in_use_connections) == 1

    def claims() -> None:
        for _ in range(20):
            s.claim(K, "w", batch=5)

    other = threading.Thread(target=claims)
    other.start()
    other.join()
    # the other thread holds one of its own (the pool's idle one, taken out of it)
    assert len(client.connection_pool._in_use_connections) == 2
    client.ping()  # the pool's own calls get one of their own again
    assert len(_names(admin)) == 3
    for _ in range(20):
        s.claim(K, "w", batch=5)
    assert len(_names(admin)) == 3


def test_a_held_connection_killed_is_replaced_at_the_next_call(
        fresh_server: Callable[..., RedisServer]) -> None:
    server = fresh_server()
    client = redis.Redis.from_url(server.url, decode_responses=True, client_name="held-0")
    admin = redis.Redis.from_url(server.url, decode_responses=True)
    s = Scripts(client, hold=True)
    s.claim(K, "w", batch=5)

    def held_id() -> int:
        conn = s._held.conn  # type: ignore[union-attr]
        conn.send_command("CLIENT", "ID")
        return int(conn.read_response())

    before = held_id()
    admin.client_kill_filter(_id=before)
    try:  # as a pool's connection would: retried if the client retries, else raised
        s.claim(K, "w", batch=5)
    except redis.ConnectionError:
        pass
    assert s.claim(K, "w", batch=5).claimed == []
    assert held_id() != before


def test_scripts_without_hold_give_their_connection_back(r: redis.Redis) -> None:
    s = Scripts(r)
    s.claim(K, "w", batch=5)
    assert not r.connection_pool._in_use_connections
