"""Browser sessions against real `cronsvc web` processes, with httpx: signing in takes the
CSRF token; the cookie is a signed session, not the secret; signing out ends it in every
process of the state dir; it ends with its token or its time, and outlives a restart;
and it is sent Secure when a trusted proxy says the browser came over HTTPS."""

from __future__ import annotations

import stat
from pathlib import Path

import httpx
import pytest
import yaml

from cronsvc.testing import WebServer, published
from tests.support.wait import wait_for

pytestmark = pytest.mark.slow
OPERATOR = "operator-secret-0123456789"
CI = "ci-secret-0123456789abcdef"
TOKENS = {"CRONSVC_WEB_TOKEN": OPERATOR}


@pytest.fixture
def config(tmp_path: Path, redis_url: str) -> Path:
    path = tmp_path / "schedules.yaml"
    path.write_text(yaml.safe_dump({"jobs": {"digest": {"command": ["true"]}}}))
    published(redis_url, path)
    return path


def signed_in_as(web: WebServer, cookie: str) -> bool:
    """Whether a browser holding ``cookie`` sees the jobs page (else: sent to sign in)."""
    with httpx.Client(base_url=web.url, cookies={"cronsvc_session": cookie}) as http:
        reply = http.get("/jobs")
    assert reply.status_code in (200, 303), reply.text
    return reply.status_code == 200


def test_signing_in_takes_the_csrf_token_and_gives_a_session_not_the_secret(
        tmp_path: Path, redis_url: str, config: Path) -> None:
    with WebServer(tmp_path, redis_url, config, env=TOKENS) as web, \
            httpx.Client(base_url=web.url) as http:
        http.get("/login")
        form = {"token": OPERATOR, "next": "/jobs"}
        assert http.post("/login", data=form).status_code == 403  # no CSRF token
        form["csrf"] = http.cookies["cronsvc_csrf"]
        foreign = http.post("/login", data=form, headers={"Origin": "http://attacker.example"})
        assert foreign.status_code == 403 and "cronsvc_session" not in http.cookies
        signed = http.post("/login", data=form)
        assert (signed.status_code, signed.headers["location"]) == (303, "/jobs")
        cookie = http.cookies["cronsvc_session"]
        assert OPERATOR not in cookie
        assert signed.headers["set-cookie"] == (
            f"cronsvc_session={cookie}; HttpOnly; Max-Age=43200; Path=/; SameSite=strict")
        assert signed_in_as(web, cookie) and not signed_in_as(web, OPERATOR)


def test_signing_out_ends_the_session_in_every_web_process_of_the_state_dir(
        tmp_path: Path, redis_url: str, config: Path) -> None:
    with WebServer(tmp_path, redis_url, config, env=TOKENS) as one, \
            WebServer(tmp_path, redis_url, config, env=TOKENS) as other, \
            one.signed_in(OPERATOR) as http:
        cookie = http.cookies["cronsvc_session"]
        assert signed_in_as(other, cookie)  # one key per state dir: either serves it
        out = http.post("/logout", data={"csrf": http.cookies["cronsvc_csrf"]})
        assert (out.status_code, out.headers["location"]) == (303, "/login")
        assert not signed_in_as(one, cookie) and not signed_in_as(other, cookie)


def test_a_session_outlives_a_restart_but_not_its_token(
        tmp_path: Path, redis_url: str, config: Path) -> None:
    tokens = tmp_path / "tokens"
    tokens.write_text(f"ops operator {OPERATOR}\nci operator {CI}\n")
    with WebServer(tmp_path, redis_url, config, "--token-file", str(tokens)) as web, \
            web.signed_in(OPERATOR) as ops, web.signed_in(CI) as ci:
        cookies = {"ops": ops.cookies["cronsvc_session"], "ci": ci.cookies["cronsvc_session"]}
    key = tmp_path / ".cronsvc" / "web-session-key"
    assert stat.S_IMODE(key.stat().st_mode) == 0o600
    tokens.write_text(f"ops operator {OPERATOR}\n")  # ci's token is withdrawn
    with WebServer(tmp_path, redis_url, config, "--token-file", str(tokens)) as web:
        assert signed_in_as(web, cookies["ops"]) and not signed_in_as(web, cookies["ci"])
    tokens.write_text(f"ops operator {CI}\n")  # the same name, another secret
    with WebServer(tmp_path, redis_url, config, "--token-file", str(tokens)) as web:
        assert not signed_in_as(web, cookies["ops"])


def test_a_session_ends_when_its_time_is_up(tmp_path: Path, redis_url: str,
                                           config: Path) -> None:
    with WebServer(tmp_path, redis_url, config, "--session-ttl", "1s", env=TOKENS) as web, \
            web.signed_in(OPERATOR) as http:
        cookie = http.cookies["cronsvc_session"]
        wait_for(lambda: not signed_in_as(web, cookie), message="the session to expire")


def test_cookies_are_secure_when_a_trusted_proxy_says_https(
        tmp_path: Path, redis_url: str, config: Path) -> None:
    with WebServer(tmp_path, redis_url, config, "--trusted-proxy", "127.0.0.1",
                   env=TOKENS) as proxied, \
            WebServer(tmp_path, redis_url, config, env=TOKENS) as direct:
        for web, secure in ((proxied, True), (direct, False)):
            with httpx.Client(base_url=web.url, headers={"X-Forwarded-Proto": "https"}) as http:
                csrf = http.get("/login").headers["set-cookie"]
                # Sent by hand: httpx keeps a Secure cookie from a plain http:// URL.
                token = csrf.split(";")[0].split("=", 1)[1]
                signed = http.post("/login", data={"token": OPERATOR, "csrf": token},
                                   headers={"Cookie": f"cronsvc_csrf={token}"})
                assert signed.status_code == 303, signed.text
                for cookie in (csrf, signed.headers["set-cookie"]):
                    assert ("; secure" in cookie.lower()) is secure, cookie
