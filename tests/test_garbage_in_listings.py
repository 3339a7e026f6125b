"""Listings over garbage in Redis: the CLI, the API and the pages show what they can read
and name what they cannot; a claim then sets the queue's garbage aside, and `cronsvc
malformed` lists it. (Before, `cronsvc queue` failed with "not a fire id", `schedule ls`
printed a traceback and `/api/v1/schedules` answered 500.)"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import redis
import yaml
from click.testing import CliRunner, Result

from cronsvc.cli.main import main
from cronsvc.client.client import Client
from cronsvc.keys import Keys
from cronsvc.store.connection import connect
from cronsvc.store.scripts import Scripts
from cronsvc.testing import WebServer
from tests.chaos.garbage import plant
from tests.support.wait import server_ms

K = Keys()


@pytest.fixture
def fleet(redis_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A published file with a job that has a runtime schedule, and garbage everywhere."""
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "schedules.yaml"
    path.write_text(yaml.safe_dump({"jobs": {"latest-0": {"cron": "* * * * *",
                                                          "command": ["true"]}}}))
    client = Client(redis_url, config=str(path))
    client.publish_config()
    client.upsert_schedule("good:1", job="latest-0", every="1h")
    raw = redis.Redis.from_url(redis_url)
    plant(raw, K, server_ms(raw), "latest-0", "w")
    raw.close()
    monkeypatch.setenv("CRONSVC_REDIS_URL", redis_url)
    monkeypatch.setenv("CRONSVC_CONFIG", str(path))
    return path


def run(*args: str) -> Result:
    result = CliRunner().invoke(main, list(args))
    assert result.exit_code == 0 and "Traceback" not in result.output, (
        args, result.output, result.exception)
    return result


def test_the_cli_lists_what_it_reads_and_names_the_rest(fleet: Path) -> None:
    queue = run("queue")
    assert "left out, not readable: cron:queue 'marker': not a fire id" in queue.stderr
    assert "\\x1b[2J" in queue.stderr and "\x1b" not in queue.stderr
    schedules = run("schedule", "ls")
    assert "good:1" in schedules.stdout and "ghost:1" not in schedules.stdout
    assert "left out, not readable: cron:schedules 'ghost:1': not a stored schedule" in \
        schedules.stderr
    history = run("history", "latest-0")
    assert "left out, not readable: cron:history:latest-0 'garbage': not a history record" \
        in history.stderr
    dead = run("dead")
    assert "left out, not readable: cron:dead 'marker': not a fire id" in dead.stderr
    jobs = run("ls")
    assert "latest-0" in jobs.stdout and "cron:jobs 'ghost0': not a policy line" in jobs.stderr
    assert json.loads(run("queue", "--json").stdout)["unreadable"]
    run("status")


def test_a_claim_sets_the_queue_garbage_aside_and_malformed_lists_it(
        fleet: Path, redis_url: str) -> None:
    assert "nothing set aside" in run("malformed").stdout
    Scripts(connect(redis_url)).claim(K, "w", batch=10, scan_limit=100)
    listed = run("malformed", "-n", "100")
    assert "cron:queue" in listed.stdout and "'marker@abc'" in listed.stdout
    assert "not a fire id" in listed.stdout
    status = run("status")
    assert "were set aside, the newest:" in status.stderr
    assert "left out" not in run("queue").stderr.replace("cron:queue:", "")
    entries = json.loads(run("malformed", "--json").stdout)
    assert entries["total"] >= 13 and {"key", "member", "why", "at_ms"} <= set(
        entries["entries"][0])


def test_the_api_and_the_pages_answer_and_name_what_they_leave_out(
        fleet: Path, redis_url: str, tmp_path: Path) -> None:
    with WebServer(tmp_path, redis_url, fleet) as web, web.client() as http:
        schedules = http.get("/api/v1/schedules")
        assert schedules.status_code == 200, schedules.text
        assert [s["id"] for s in schedules.json()["items"]] == ["ghost:3", "good:1"]
        assert any("ghost:1" in u for u in schedules.json()["unreadable"])
        for path in ("/api/v1/jobs", "/api/v1/dead", "/api/v1/queue", "/api/v1/status",
                     "/api/v1/jobs/latest-0/history", "/api/v1/malformed"):
            reply = http.get(path)
            assert reply.status_code == 200, (path, reply.text)
        assert any("marker" in u for u in http.get("/api/v1/dead").json()["unreadable"])
        shown = http.get("/api/v1/schedules/ghost:2")
        assert shown.status_code == 409 and "ghost:2" in shown.json()["error"], shown.text
        for page in ("/", "/jobs", "/jobs/latest-0", "/dead", "/fleet"):
            reply = http.get(page, headers={"accept": "text/html"})
            assert reply.status_code == 200, (page, reply.text[:300])
