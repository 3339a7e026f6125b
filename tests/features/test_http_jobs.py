"""An ``http`` job run by a real planner and worker: each fire reaches a real HTTP server
on a loopback port, ``cronsvc history`` shows the runs with their status line, and the
secret the worker filled in from its environment is nowhere in Redis."""

from __future__ import annotations

from pathlib import Path

import pytest
import redis
from click.testing import CliRunner

from cronsvc.cli.main import main
from cronsvc.testing import Fleet, history
from tests.support.cli import ok
from tests.support.receivers import http_receiver
from tests.support.wait import wait_for

pytestmark = pytest.mark.slow

SECRET = "tok-9f3a61c2e8"
TENANT = "tenant-4b1d7e"  # a secret in the URL's path, as a webhook's often is


def everything_in(redis_url: str) -> bytes:
    """Every key and value of the database, as bytes to search (some values are binary)."""
    raw = redis.Redis.from_url(redis_url)
    dump: list[bytes] = []
    for key in raw.scan_iter(count=1000):
        kind = raw.type(key)
        if kind == b"string":
            values = [raw.get(key) or b""]
        elif kind == b"hash":
            values = [item for pair in raw.hgetall(key).items() for item in pair]
        elif kind == b"list":
            values = raw.lrange(key, 0, -1)
        elif kind == b"set":
            values = sorted(raw.smembers(key))
        elif kind == b"zset":
            values = raw.zrange(key, 0, -1)
        else:
            values = [repr(raw.xrange(key)).encode()] if kind == b"stream" else []
        dump += [key, *values]
    raw.close()
    return b"\n".join(dump)


def test_an_every_second_http_job_runs_on_the_fleet(
        tmp_path: Path, redis_url: str, r: redis.Redis, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("H27_TOKEN", SECRET)  # the worker's environment, read when sending
    monkeypatch.setenv("H27_TENANT", TENANT)
    with http_receiver() as hook:
        hook.answer = b'{"pong": true}'
        jobs = {"ping": {"every": "1s", "timeout": "10s", "http": {
            "url": f"{hook.url}/healthz/${{H27_TENANT}}", "expect": [200],
            "headers": {"Authorization": "Bearer ${H27_TOKEN}"}}}}
        fleet = Fleet(tmp_path, redis_url, jobs)
        with fleet.running("w1"):
            wait_for(lambda: len([h for h in history(r, "ping") if h.get("status") == "ok"])
                     >= 2, timeout=30, message="two ok runs of ping")
        first = hook.received[0]
        assert first.path == f"/healthz/{TENANT}"
        assert first.headers["Authorization"] == f"Bearer {SECRET}"
        assert first.headers["Idempotency-Key"] == first.headers["X-Cronsvc-Fire-Id"]
        fires = [got.headers["Idempotency-Key"] for got in hook.received]
        assert len(set(fires)) == len(fires)  # one request per fire
    where = ["--config", str(fleet.config), "--redis-url", redis_url]
    listed = ok(CliRunner().invoke(main, ["history", "ping", *where]))
    rows = [line.split() for line in listed.splitlines()[1:]]
    assert len([row for row in rows if row[1] == "ok"]) >= 2, listed
    fire = next(row[0] for row in rows if row[1] == "ok")
    shown = ok(CliRunner().invoke(main, ["show", fire, *where]))
    assert "HTTP/1.0 200 OK" in shown and '{"pong": true}' in shown, shown
    stored = everything_in(redis_url)
    assert b"HTTP/1.0 200 OK" in stored  # the search covers history
    for secret in (SECRET, TENANT):
        assert secret.encode() not in stored
        assert secret not in fleet.logs()
