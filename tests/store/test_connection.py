"""connect(): URLs with passwords and ACL users, and errors that never show a password."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import redis

from cronsvc.errors import RedisUnavailable
from cronsvc.process.redis_server import RedisServer, free_port
from cronsvc.store.connection import connect, mask_url


@pytest.mark.parametrize("url, shown", [
    ("redis://127.0.0.1:6379/0", "redis://127.0.0.1:6379/0"),
    ("redis://:s3cret@host:6379/1", "redis://:***@host:6379/1"),
    ("rediss://alice:s3cret@cache.example.com:6380/0?ssl_cert_reqs=none",
     "rediss://alice:***@cache.example.com:6380/0?ssl_cert_reqs=none"),
    ("redis://alice@host", "redis://alice@host"),
])
def test_mask_url(url: str, shown: str) -> None:
    assert mask_url(url) == shown


def test_connect_and_decode(redis_url: str) -> None:
    client = connect(redis_url)
    assert client.set("k", "v") and client.get("k") == "v"
    assert connect(redis_url, decode_responses=False).get("k") == b"v"


def test_unreachable_names_the_url() -> None:
    url = f"redis://:s3cret@127.0.0.1:{free_port()}/0"
    with pytest.raises(RedisUnavailable) as err:
        connect(url, timeout=1.0)
    message = str(err.value)
    assert message.startswith("cannot reach Redis at redis://:***@127.0.0.1:")
    assert "s3cret" not in message


def test_bad_url_scheme() -> None:
    with pytest.raises(RedisUnavailable, match="cannot reach Redis at http://:\\*\\*\\*@x"):
        connect("http://:pw@x:1/0")


def test_passwords_and_acl_users(fresh_server: Callable[..., RedisServer]) -> None:
    server = fresh_server()
    admin = redis.Redis.from_url(server.url)
    admin.acl_setuser("alice", enabled=True, passwords=["+wonder"], keys=["*"], commands=["+@all"])
    admin.config_set("requirepass", "s3cret")  # after startup: RedisServer pings without auth
    port = server.port
    assert connect(f"redis://:s3cret@127.0.0.1:{port}/0").ping()
    assert connect(f"redis://alice:wonder@127.0.0.1:{port}/0").ping()
    for url in (f"redis://:wrong@127.0.0.1:{port}/0", f"redis://alice:nope@127.0.0.1:{port}/0",
                f"redis://127.0.0.1:{port}/0"):
        with pytest.raises(RedisUnavailable) as err:
            connect(url)
        assert "wrong" not in str(err.value) and "nope" not in str(err.value)
        assert str(err.value).startswith(f"cannot reach Redis at {mask_url(url)}: ")
