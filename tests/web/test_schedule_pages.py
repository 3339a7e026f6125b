"""Runtime schedules and runs with a payload from the dashboard, in a real headless
Chromium against a real `cronsvc web`, a planner and a worker on a real redis-server: a
schedule is created, refused input is shown beside its field, the schedule is changed,
paused, resumed and deleted; a job runs with a payload; each change is in Redis and in the
audit log under the operator's name. A read token sees no form and gets 403 for a post."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cronsvc.client.client import Client
from cronsvc.errors import UnknownSchedule
from cronsvc.testing import Fleet, WebServer
from tests.support.browser import shoot, watched
from tests.support.wait import wait_for
from tests.support.web import OPERATOR_TOKEN

pytestmark = pytest.mark.slow
READ_TOKEN = "reader-secret-0123456789"
SID = "digest:user-42"


@pytest.fixture
def fleet(tmp_path: Path, redis_url: str) -> Iterator[Fleet]:
    """An on-demand job that writes the payload of each run to ``payload.json``."""
    f = Fleet(tmp_path, redis_url, {})
    f.write({"digest": {"command": ["sh", "-c", 'printf %s "$CRONSVC_PAYLOAD" > payload.json'],
                        "cwd": str(tmp_path), "description": "a digest for one customer"}})
    with f.running("worker-1"):
        wait_for(lambda: f.client().published_jobs() == ["digest"], message="the publish")
        yield f


@pytest.fixture
def web(tmp_path: Path, redis_url: str, fleet: Fleet) -> Iterator[WebServer]:
    with WebServer(tmp_path, redis_url, fleet.config) as server:
        yield server


def refused(page: Any, field: str, says: str) -> None:
    """The form came back with the error beside ``field``, and the field marked."""
    assert page.locator(f"[name={field}][aria-invalid=true]").count() == 1, field
    assert says in page.locator(f"#error-{field}").inner_text()


def test_an_operator_creates_changes_pauses_and_deletes_a_schedule(
        browser: Any, web: WebServer, fleet: Fleet, tmp_path: Path) -> None:
    c = Client(fleet.redis_url, config=str(fleet.config))
    page, errors = watched(browser, 1100, 1000)
    page.goto(f"{web.url}/jobs/digest")
    assert page.locator("ul.fires").inner_text() == "none"
    assert "the job file is the source of truth" in page.locator("main").inner_text()

    # Refused input comes back in the form, beside its field, the rest as typed.
    page.click("a[data-action=schedule-new]")
    page.fill("input[name=id]", SID)
    page.fill("input[name=cron]", "61 9 * * *")
    page.fill("input[name=timezone]", "Europe/Berlin")
    page.fill("textarea[name=payload]", '{"user": 42}')
    with page.expect_response(lambda r: r.request.method == "POST") as posted:
        page.click("button[data-action=schedule-create]")
    assert posted.value.status == 400
    refused(page, "cron", "'61 9 * * *'")
    assert page.input_value("textarea[name=payload]") == '{"user": 42}'
    page.fill("input[name=cron]", "0 9 * * 1-5")
    page.fill("input[name=timezone]", "Europe/Atlantis")
    page.click("button[data-action=schedule-create]")
    refused(page, "timezone", "Europe/Atlantis")
    page.fill("input[name=timezone]", "Europe/Berlin")
    page.fill("textarea[name=payload]", '{"user": 42,}')
    page.click("button[data-action=schedule-create]")
    refused(page, "payload", "not JSON")
    assert "line 1 column" in page.locator("#error-payload").inner_text()
    shoot(page, tmp_path, "schedule-refused")
    with pytest.raises(UnknownSchedule):
        c.get_schedule(SID)

    # Created: its page, and the schedule in Redis as typed, written by the operator.
    page.fill("textarea[name=payload]", '{"user": 42}')
    shoot(page, tmp_path, "schedule-new")
    page.click("button[data-action=schedule-create]")
    page.wait_for_url("**/schedules/**?msg=*")
    assert f"{SID} created" in page.locator(".flash").inner_text()
    s = c.get_schedule(SID)
    assert (s.job, s.cron, s.timezone, s.payload, s.actor) == (
        "digest", "0 9 * * 1-5", "Europe/Berlin", {"user": 42}, "web:local")
    assert page.locator("ul.fires li").count() == 10
    shoot(page, tmp_path, "schedule")

    # The job, driven only by it, shows its next fires now.
    page.goto(f"{web.url}/jobs/digest")
    fires = page.locator("ul.fires li")
    assert fires.count() == 10 and SID in fires.first.inner_text()
    assert "09:00:00 +01" in fires.first.inner_text()

    # Changed: every 90 minutes; the payload the form showed is kept.
    page.click(f"tr[data-schedule='{SID}'] a")
    page.fill(".schedule-form input[name=cron]", "")
    page.fill(".schedule-form input[name=every]", "90m")
    page.click("button[data-action=schedule-save]")
    page.wait_for_url("**/schedules/**?msg=*")
    assert f"{SID} changed" in page.locator(".flash").inner_text()
    s = c.get_schedule(SID)
    assert (s.cron, s.every_ms, s.payload) == (None, 5_400_000, {"user": 42})
    assert "every 1 h 30 min" in page.locator("table.kv").inner_text()

    # Paused and resumed.
    page.click("button[data-action=schedule-pause]")
    page.wait_for_url("**/schedules/**?msg=*")
    assert c.get_schedule(SID).paused
    assert "None while paused" in page.locator("main").inner_text()
    page.click("button[data-action=schedule-resume]")
    page.wait_for_url("**/schedules/**?msg=*")
    assert not c.get_schedule(SID).paused

    # Deleted: back to the job, and gone from Redis.
    page.click("button[data-action=schedule-delete]")
    page.wait_for_url("**/jobs/digest?msg=*")
    assert f"{SID} deleted" in page.locator(".flash").inner_text()
    with pytest.raises(UnknownSchedule):
        c.get_schedule(SID)
    actions = [(a.actor, a.action, a.target) for a in c.audit(limit=20).actions]
    for action in ("schedule-set", "schedule-pause", "schedule-resume", "schedule-delete"):
        assert ("web:local", action, SID) in actions, action
    assert errors == []
    page.close()


def test_a_change_from_the_page_keeps_the_calendar_it_cannot_show(
        browser: Any, web: WebServer, fleet: Fleet) -> None:
    c = Client(fleet.redis_url, config=str(fleet.config))
    c.upsert_schedule("team/berlin:digest", job="digest", cron="0 8 * * *", business_days=True,
                      skip={"holidays": "DE-BY"}, max_runs=30)
    before = c.get_schedule("team/berlin:digest")
    page = browser.new_page()
    page.goto(f"{web.url}/schedules/team/berlin:digest")
    page.fill(".schedule-form input[name=cron]", "30 8 * * *")
    page.click("button[data-action=schedule-save]")
    page.wait_for_url("**/schedules/**?msg=*")
    after = c.get_schedule("team/berlin:digest")
    assert after.cron == "30 8 * * *"
    assert (after.calendar, after.max_runs, after.start_ms) == (
        before.calendar, before.max_runs, before.start_ms)
    page.close()


def test_an_operator_runs_a_job_with_a_payload(browser: Any, web: WebServer, fleet: Fleet,
                                               tmp_path: Path) -> None:
    c = Client(fleet.redis_url, config=str(fleet.config))
    page = browser.new_page()
    page.goto(f"{web.url}/jobs/digest")
    page.click("a[data-action=run-payload]")
    page.fill("textarea[name=payload]", "{user: 42}")
    page.click("button[data-action=trigger-payload]")
    refused(page, "payload", "not JSON")
    page.fill("textarea[name=payload]", '{"user": 42, "plan": "weekly"}')
    page.click("button[data-action=trigger-payload]")
    page.wait_for_url("**/jobs/digest?msg=*")
    assert "digest runs now" in page.locator(".flash").inner_text()
    out = tmp_path / "payload.json"
    wait_for(lambda: out.exists() and out.read_text(), message="the run to write its payload")
    assert json.loads(out.read_text()) == {"user": 42, "plan": "weekly"}
    assert ("web:local", "trigger", "digest") in [
        (a.actor, a.action, a.target) for a in c.audit(limit=5).actions]
    page.close()


def test_a_read_token_sees_no_form_and_may_not_post(
        browser: Any, tmp_path: Path, redis_url: str, fleet: Fleet) -> None:
    c = Client(fleet.redis_url, config=str(fleet.config))
    c.upsert_schedule(SID, job="digest", every="1h")
    env = {"CRONSVC_WEB_TOKEN": OPERATOR_TOKEN, "CRONSVC_WEB_READ_TOKEN": READ_TOKEN}
    with WebServer(tmp_path, redis_url, fleet.config, env=env) as server:
        page = browser.new_page()
        page.goto(f"{server.url}/jobs/digest")
        page.fill("input[name=token]", READ_TOKEN)
        page.click("form.login button")
        page.wait_for_url("**/jobs/digest")
        assert page.locator("[data-action]").count() == 0
        page.goto(f"{server.url}/schedules/{SID}")
        assert "every 1 h" in page.locator("table.kv").inner_text()
        assert page.locator("main form, main [data-action]").count() == 0
        page.close()
        with server.client(READ_TOKEN) as http:
            replies = [
                http.get("/jobs/digest/schedules/new"), http.get("/jobs/digest/run"),
                http.post("/jobs/digest/schedules", data={"id": "x", "every": "1h"}),
                http.post(f"/schedules/{SID}", data={"do": "pause"}),
                http.post(f"/schedules/{SID}", data={"do": "delete"}),
                http.post("/jobs/digest/trigger", data={"payload": "{}"})]
    assert [r.status_code for r in replies] == [403] * 6
    assert not c.get_schedule(SID).paused
    assert c.schedules(job="digest").schedules == [c.get_schedule(SID)]
