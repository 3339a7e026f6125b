"""The dashboard's security in a real headless Chromium against a real `cronsvc web`:
signing in through the form (it carries the CSRF token), signing out ending the session
for any browser that kept its cookie, and every page, the API docs included, working
under its Content-Security-Policy with no violation reported. With httpx: every kind of
response carries the security headers."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
import yaml

from cronsvc.client.client import Client
from cronsvc.testing import WebServer, published

pytestmark = pytest.mark.slow
OPERATOR = "operator-secret-0123456789"
HEADERS = {
    "content-security-policy": "default-src 'none'; script-src 'self'; style-src 'self'; "
                               "img-src 'self' data:; connect-src 'self'; font-src 'self'; "
                               "form-action 'self'; base-uri 'none'; frame-ancestors 'none'",
    "x-frame-options": "DENY", "x-content-type-options": "nosniff",
    "referrer-policy": "same-origin"}


@pytest.fixture
def client(tmp_path: Path, redis_url: str) -> Client:
    path = tmp_path / "schedules.yaml"
    path.write_text(yaml.safe_dump({"jobs": {"digest": {"cron": "0 9 * * *",
                                                        "command": ["true"]}}}))
    return published(redis_url, path)


@pytest.fixture
def web(tmp_path: Path, redis_url: str, client: Client) -> Iterator[WebServer]:
    assert client.config is not None
    with WebServer(tmp_path, redis_url, Path(client.config.source),
                   env={"CRONSVC_WEB_TOKEN": OPERATOR}) as server:
        yield server


def sign_in(page: Any, web: WebServer) -> None:
    page.goto(f"{web.url}/jobs")
    page.fill("input[name=token]", OPERATOR)
    page.click("form.login button")
    page.wait_for_url("**/jobs")


def security_headers(headers: dict[str, str]) -> dict[str, str | None]:
    return {name: headers.get(name) for name in HEADERS}


def test_every_page_works_under_its_content_security_policy(
        browser: Any, web: WebServer, client: Client) -> None:
    page = browser.new_page()
    reported: list[str] = []
    page.on("console", lambda m: reported.append(m.text)
            if "Content Security Policy" in m.text else None)
    page.on("pageerror", lambda exc: reported.append(str(exc)))
    sign_in(page, web)
    fire = client.trigger("digest")
    client.upsert_schedule("digest:one", job="digest", every="1h")
    for path in ("/", "/jobs", "/jobs/digest", "/dead", "/fleet", "/audit",
                 f"/fires/{quote(fire, safe='')}", "/schedules/digest:one",
                 "/jobs/digest/schedules/new", "/jobs/digest/run", "/login", "/api/docs"):
        reply = page.goto(f"{web.url}{path}")
        assert reply.status == 200 and security_headers(reply.headers) == HEADERS, path
    # The docs page's script, a file of its own, ran: Swagger UI shows the API.
    assert "cronsvc" in page.locator(".swagger-ui .info .title").inner_text()
    page.goto(f"{web.url}/jobs")
    assert "T" not in page.locator("time[data-ms]").first.inner_text()  # app.js ran
    assert reported == []
    # The policy is enforced, and a breach would be reported: an inline script is refused.
    with page.expect_console_message(lambda m: "Content Security Policy" in m.text):
        page.evaluate("""() => { const s = document.createElement('script');
                                 s.textContent = 'window.inlineRan = true';
                                 document.body.append(s); }""")
    assert page.evaluate("() => window.inlineRan") is None
    page.close()


def test_signing_out_ends_the_session_for_a_browser_that_kept_its_cookie(
        browser: Any, web: WebServer) -> None:
    mine = browser.new_context()
    page = mine.new_page()
    sign_in(page, web)
    (session,) = [c for c in mine.cookies() if c["name"] == "cronsvc_session"]
    assert OPERATOR not in session["value"] and session["httpOnly"]
    page.click("header form button")  # sign out
    page.wait_for_url("**/login")
    thief = browser.new_context()
    thief.add_cookies([session])
    stolen = thief.new_page()
    stolen.goto(f"{web.url}/jobs")
    assert "/login" in stolen.url
    mine.close()
    thief.close()


def test_every_kind_of_response_carries_the_security_headers(web: WebServer) -> None:
    with web.client() as anonymous, web.client(OPERATOR) as api:
        replies = [anonymous.get("/static/app.js"), anonymous.get("/api/v1/jobs"),
                   anonymous.get("/jobs"), anonymous.get("/healthz"),
                   anonymous.get("/jobs", headers={"Host": "attacker.example"}),
                   api.get("/api/v1/jobs"), api.get("/api/v1/nothing-here")]
    assert [r.status_code for r in replies] == [200, 401, 303, 200, 400, 200, 404]
    for reply in replies:
        assert security_headers(dict(reply.headers)) == HEADERS, reply.url
