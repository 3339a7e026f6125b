"""One owner of the job file in every process: a planner, a worker and the web server follow
the file as it changes, keep their last good one while it is broken, and the fleet's state
says so (status, the API, the overview page) until the file reads again."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from cronsvc.testing import Fleet, WebServer
from tests.support.wait import wait_for

pytestmark = pytest.mark.slow


def rejected(status: dict[str, Any]) -> list[str]:
    return [w for w in status["warnings"] if "is rejected since" in w]


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
        # Valid again: the warnings go.
        fleet.write({"tick": {"cron": "* * * * *", "command": ["true"]}})
        wait_for(lambda: not rejected(http.get("/api/v1/status").json()),
                 message="the warnings to clear once the file reads")
        wait_for(lambda: "is rejected since" not in http.get(
            "/", headers={"accept": "text/html"}).text, message="the page's warning to clear")
        assert [p.poll() for p in fleet.procs.values()] == [None, None], fleet.logs()
    assert fleet.log("w1").count("is invalid; keeping the last good config") == 1
