from __future__ import annotations

from pathlib import Path

import pytest
import redis

from cronsvc.errors import RedisServerError
from cronsvc.process.redis_server import RedisServer, find_redis_server


def test_fixture_server_answers(r: redis.Redis) -> None:
    assert r.ping()
    assert r.config_get("appendonly")["appendonly"] == "yes"


def test_env_override_must_be_executable(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    bogus = tmp_path / "redis-server"
    bogus.write_text("not a binary")
    monkeypatch.setenv("CRONSVC_REDIS_SERVER", str(bogus))
    with pytest.raises(RedisServerError, match="not an executable"):
        find_redis_server()


def test_aof_survives_kill(fresh_server) -> None:  # type: ignore[no-untyped-def]
    server: RedisServer = fresh_server(appendfsync="always")
    client = redis.Redis.from_url(server.url)
    client.set("k", "v")
    server.kill()
    server.start()
    assert redis.Redis.from_url(server.url).get("k") == b"v"


def test_start_failure_is_reported(tmp_path: Path) -> None:
    server = RedisServer(tmp_path, extra_args=["--no-such-option", "1"])
    with pytest.raises(RedisServerError, match="exited"):
        server.start()
