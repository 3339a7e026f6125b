"""The dashboard in a real headless Chromium, on a real fleet: a planner and a worker
process, a real redis-server and a real `cronsvc web`. Every page loads (one screenshot
each, under the test's tmp dir); pause, run now and a dead letter's retry are clicked,
and the change shows in the page and in Redis."""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import redis

from cronsvc.client.client import Client
from cronsvc.testing import Fleet, WebServer, published, read_ledger
from tests.support.browser import shoot
from tests.support.wait import wait_for

pytestmark = pytest.mark.slow


@pytest.fixture
def fleet(tmp_path: Path, redis_url: str) -> Iterator[Fleet]:
    f = Fleet(tmp_path, redis_url, {})
    f.write({
        "heartbeat": f.call_job("* * * * * *", description="proves the fleet is alive",
                                tags=["demo"]),
        "report": {"cron": "0 6 * * *", "timezone": "Europe/Berlin", "command": ["true"],
                   "description": "the morning report", "tags": ["reports"]},
        "flaky": {"cron": "*/2 * * * * *", "command": ["sh", "-c", "echo boom >&2; exit 3"],
                  "retries": 0, "description": "fails every time"},
    })
    with f.running("worker-1"):
        yield f


@pytest.fixture
def web(tmp_path: Path, redis_url: str, fleet: Fleet) -> Iterator[WebServer]:
    with WebServer(tmp_path, redis_url, fleet.config) as server:
        yield server


def test_every_page_loads_and_the_buttons_change_the_fleet(
        browser: Any, web: WebServer, fleet: Fleet, r: redis.Redis, tmp_path: Path) -> None:
    c = Client(fleet.redis_url, config=str(fleet.config))
    wait_for(lambda: len(c.published_jobs()) == 3, message="the planner to publish")
    wait_for(lambda: c.dead("flaky"), timeout=30, message="a dead letter of flaky")
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))

    # Every page loads, with what it is for.
    page.goto(f"{web.url}/")
    assert page.locator("h1").inner_text() == "Overview"
    assert "worker" in page.locator(".cards").inner_text()
    shoot(page, tmp_path, "overview")
    page.goto(f"{web.url}/jobs")
    rows = page.locator("table.jobs tbody tr")
    assert sorted(rows.evaluate_all("rs => rs.map(r => r.dataset.job)")) == [
        "flaky", "heartbeat", "report"]
    shoot(page, tmp_path, "jobs")
    page.goto(f"{web.url}/jobs/report")
    assert "the morning report" in page.inner_text("main")
    assert "Europe/Berlin" in page.inner_text("main")
    shoot(page, tmp_path, "job-report")
    page.goto(f"{web.url}/fleet")
    assert "worker-1" in page.inner_text("main")
    shoot(page, tmp_path, "fleet")
    page.goto(f"{web.url}/dead")
    shoot(page, tmp_path, "dead")
    page.goto(f"{web.url}/audit")
    shoot(page, tmp_path, "audit")
    dead_fire = c.dead("flaky")[0].fire
    page.goto(f"{web.url}/fires/{dead_fire}")
    assert "exit" in page.inner_text("main").lower()
    shoot(page, tmp_path, "fire")

    # Times are the viewer's, to the second: the ISO UTC text is replaced, and the UTC
    # time to the millisecond is on hover.
    page.goto(f"{web.url}/jobs")
    times = page.locator("time[data-ms]")
    assert times.count() > 0
    for text, title in times.evaluate_all("ts => ts.map(t => [t.innerText, t.title])"):
        assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d", text), text
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{3})?Z", title), title
    # A time to the millisecond says so on hover: a one-off due at .123 (the runs' starts
    # may fall on a whole second: fires claimed ahead start at their due time).
    due = datetime.now(UTC).replace(microsecond=0) + timedelta(hours=1, milliseconds=123)
    one_off = c.enqueue("report", due)
    page.goto(f"{web.url}/fires/{one_off}")
    titles = page.locator("time[data-ms]").evaluate_all("ts => ts.map(t => t.title)")
    assert any(t.endswith(".123Z") for t in titles), titles
    assert c.cancel(one_off)
    page.goto(f"{web.url}/jobs")

    # Pause: the row turns to Resume, and the job is paused in Redis.
    page.locator("tr[data-job=heartbeat] button[data-action=pause]").click()
    page.wait_for_url("**/jobs?msg=*")
    assert "heartbeat paused" in page.locator(".flash").inner_text()
    assert page.locator("tr[data-job=heartbeat] button[data-action=resume]").count() == 1
    assert c.job("heartbeat").paused

    # Run now: a trigger fire of the paused job runs (triggers run even while paused).
    before = len(read_ledger(fleet.ledger))
    page.locator("tr[data-job=heartbeat] button[data-action=trigger]").click()
    page.wait_for_url("**/jobs?msg=*")
    assert "heartbeat runs now" in page.locator(".flash").inner_text()
    wait_for(lambda: any("#" in e["fire"] for e in read_ledger(fleet.ledger)[before:]),
             message="the triggered run to start")
    page.locator("tr[data-job=heartbeat] button[data-action=resume]").click()
    page.wait_for_url("**/jobs?msg=*")
    assert not c.job("heartbeat").paused

    # Retry a dead letter: it leaves the dead set, and the audit log says who did it.
    page.goto(f"{web.url}/dead")
    page.locator(f"tr[data-fire='{dead_fire}'] button[data-action=retry]").click()
    page.wait_for_url("**/dead?msg=*")
    assert "1 fire(s) queued again" in page.locator(".flash").inner_text()
    actions = [(a.actor, a.action, a.target) for a in c.audit(limit=20).actions]
    assert ("web:local", "retry", dead_fire) in actions
    assert ("web:local", "pause", "heartbeat") in actions
    page.goto(f"{web.url}/audit")
    assert dead_fire in page.inner_text("main")

    # Live: the job page shows a new run without a reload.
    page.goto(f"{web.url}/jobs/heartbeat")
    rows = page.locator("table.history tbody tr")
    rows.nth(rows.count()).wait_for(timeout=30_000)  # one row more than now
    shoot(page, tmp_path, "job")
    assert errors == []
    page.close()


def test_a_token_server_asks_to_sign_in_and_a_read_token_cannot_act(
        browser: Any, tmp_path: Path, redis_url: str, fleet: Fleet) -> None:
    c = Client(fleet.redis_url, config=str(fleet.config))
    wait_for(lambda: len(c.published_jobs()) == 3, message="the planner to publish")
    env = {"CRONSVC_WEB_TOKEN": "operator-secret-0123456789",
           "CRONSVC_WEB_READ_TOKEN": "reader-secret-0123456789"}
    with WebServer(tmp_path, redis_url, fleet.config, env=env) as server:
        page = browser.new_page()
        page.goto(f"{server.url}/jobs")
        assert "/login" in page.url
        page.fill("input[name=token]", "wrong-secret-0123456789")
        page.click("form.login button")
        assert "not known" in page.inner_text("main")
        page.fill("input[name=token]", env["CRONSVC_WEB_READ_TOKEN"])
        page.click("form.login button")
        page.wait_for_url("**/jobs")
        assert page.locator("table.jobs tbody tr").count() == 3
        assert page.locator("button[data-action]").count() == 0  # read only: no buttons
        assert "read only" in page.locator(".who").inner_text()
        page.close()


def test_the_job_pages_show_where_each_job_is_declared(tmp_path: Path, redis_url: str) -> None:
    path = tmp_path / "schedules.yaml"
    path.write_text("discover: [cronsvc.examples]\n"
                    "jobs:\n  backup:\n    cron: '0 3 * * *'\n    command: ['true']\n")
    client = published(redis_url, path)
    declared = client.config.jobs["weekly-report"].declared_at if client.config else ""
    assert declared.startswith("cronsvc/examples.py:")
    with WebServer(tmp_path, redis_url, path) as server, server.client() as http:
        jobs = http.get("/jobs").text
        one = http.get("/jobs/weekly-report").text
    assert f'<div class="sub at">{declared}</div>' in jobs
    assert f'<div class="sub at">{path}:3</div>' in jobs
    assert "<th>declared at</th>" in one and f"<code>{declared}</code>" in one
