"""One owner of the job file in every process: a planner, a worker and the web server follow
the file as it changes, keep their last good one while it is broken, and the fleet's state
says so (status, the API, the overview page) until the file reads again."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from cronsvc.testing import Fleet, WebServer
from cronsvc.testing.children import child_env
from tests.support.wait import wait_for

pytestmark = pytest.mark.slow


def rejected(status: dict[str, Any]) -> list[str]:
    return [w for w in status["warnings"] if "is rejected since" in w]


def status_warnings(fleet: Fleet, config: Path) -> str:
    """What ``cronsvc status --config <config>`` says on stderr, where warnings go."""
    done = subprocess.run([sys.executable, "-m", "cronsvc", "status", "--config", str(config),
                           "--redis-url", fleet.redis_url], capture_output=True, text=True,
                          env=child_env(), timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stderr


def test_a_file_changed_or_broken_under_the_fleet_is_followed_and_shown(
        tmp_path: Path, redis_url: str) -> None:
    fleet = Fleet(tmp_path, redis_url, {"tick": {"cron": "* * * * *", "command": ["true"]}})
    with fleet.running("w1"), WebServer(tmp_path, redis_url, fleet.config) as web, \
            web.client() as http:
        # A job added later: the web shows its definition (it used to say its file lacks it).
        fleet.write({"tick": {"cron": "* * * * *", "command": ["true"]},
                     "added": {"cron": "0 3 * * *", "command": ["echo", "hi"]}})
        wait_for(lambda: http.get("/api/v1/jobs/added").status_code == 200,
                 message="the planner to publish the added job")
        wait_for(lambda: (http.get("/api/v1/jobs/added").json()["definition"] or {}).get(
            "command") == ["echo", "hi"], message="the web to read the added job")
        # Broken: every process keeps its last good file, and the fleet's state says so.
        fleet.config.write_text("jobs:\n  tick: {cron: 'not a cron', command: ['true']}\n")
        status = wait_for(lambda: len(rejected(s := http.get("/api/v1/status").json())) == 2
                          and s, message="planner and worker to say their file is rejected")
        assert all("jobs.tick.cron" in w and "it runs its last good one" in w
                   for w in rejected(status)), status["warnings"]
        page = http.get("/", headers={"accept": "text/html"}).text
        assert "the web server&#39;s job file" in page and "is rejected since" in page, page
        assert http.get("/api/v1/jobs/added").json()["definition"] is not None
        # `cronsvc status` says it too: read with the broken file, or with a good copy of it
        # elsewhere (what the fleet runs is in Redis, not in the file the CLI reads).
        good = fleet.tmp / "elsewhere" / "schedules.yaml"
        good.parent.mkdir()
        good.write_text("jobs:\n  tick: {cron: '* * * * *', command: ['true']}\n")
        for config in (fleet.config, good):
            said = [line for line in status_warnings(fleet, config).splitlines()
                    if "is rejected since" in line]
            assert len(said) == 2 and all("jobs.tick.cron" in w for w in said), (config, said)
        # Valid again: the warnings go.
        fleet.write({"tick": {"cron": "* * * * *", "command": ["true"]}})
        wait_for(lambda: not rejected(http.get("/api/v1/status").json()),
                 message="the warnings to clear once the file reads")
        wait_for(lambda: "is rejected since" not in http.get(
            "/", headers={"accept": "text/html"}).text, message="the page's warning to clear")
        assert "is rejected since" not in status_warnings(fleet, good)
        assert [p.poll() for p in fleet.procs.values()] == [None, None], fleet.logs()
    assert fleet.log("w1").count("is invalid; keeping the last good config") == 1
