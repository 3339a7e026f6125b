"""Polling outside pytest: a deadline that passes is an AssertionError naming what was
awaited, a throwaway server leaves nothing behind, and none of cronsvc.testing needs
pytest to import."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import redis

from cronsvc.errors import RedisServerError
from cronsvc.testing import Fleet, WaitTimeout, poll, wait_for
from cronsvc.testing.fleet import fleets_stopped
from cronsvc.testing.redis import redis_server
from tests.support.servers import server_binary


def test_wait_for_returns_the_first_truthy_value() -> None:
    answers = iter([None, 0, [], ["the run"]])
    assert wait_for(lambda: next(answers), message="a run") == ["the run"]


def test_a_passed_deadline_is_an_assertion_error_naming_what_was_awaited() -> None:
    with pytest.raises(AssertionError, match="waiting for the nightly run") as caught:
        wait_for(lambda: False, timeout=0.05, message="the nightly run")
    assert caught.type is WaitTimeout


def test_poll_counts_a_redis_error_as_not_yet_and_names_the_server_on_timeout() -> None:
    with redis_server(binary=server_binary()) as server:
        client = redis.Redis.from_url(server.url, socket_timeout=1)
        assert poll(client.ping, 5, "the server") is True
        data_dir = server.data_dir
    assert server.proc is not None and server.proc.poll() is not None
    assert not data_dir.exists()  # the throwaway server leaves nothing behind
    with pytest.raises(RedisServerError, match="waiting for the stopped server"):
        poll(client.ping, 0.1, "the stopped server")


def test_the_harness_imports_without_pytest() -> None:
    code = ("import sys, cronsvc.testing; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('pytest', '_pytest')))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)
    assert done.stdout.strip() == "[]"


def test_a_fleet_made_in_a_block_that_fails_is_stopped_with_it(tmp_path: Path,
                                                              redis_url: str) -> None:
    procs = []
    with pytest.raises(RuntimeError, match="a check failed"), fleets_stopped():
        fleet = Fleet(tmp_path, redis_url, {"tick": {"cron": "* * * * *", "command": ["true"]}})
        procs += [fleet.planner(), fleet.worker("w1")]
        wait_for(lambda: fleet.client().status().planners, message="the planner's tick")
        raise RuntimeError("a check failed")  # before the test's own stop_all
    assert all(proc.poll() is not None for proc in procs)
