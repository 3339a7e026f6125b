"""The ``http`` kind against a real HTTP(S) server on a loopback port: what a fire sends,
how the answer is judged, where ``${VAR}`` is filled in (and where it is not), what
ends a request, and the job file's errors for it."""

from __future__ import annotations

import json
import ssl
import threading
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from cronsvc.cli.main import main
from cronsvc.clock import iso_utc
from cronsvc.config.models import Job
from cronsvc.kinds import KINDS, execute
from cronsvc.kinds.kind import Kind
from cronsvc.outbound import trust_store_context
from cronsvc.process.redis_server import free_port
from cronsvc.run.context import FireContext
from cronsvc.run.outcome import Outcome
from tests.support.certs import new_ca, server_context, trust_file
from tests.support.receivers import http_receiver
from tests.support.wait import wait_for

KIND: Kind = KINDS["http"]
AT_MS = 1_763_830_800_000
CTX = FireContext("ping", f"ping@{AT_MS}", AT_MS, 2, payload={"order": 7})


def job(job_timeout: str | None = None, **http: Any) -> Job:
    """A job ``ping`` sending ``http``; ``job_timeout`` is the job's (``timeout`` the
    request's)."""
    return Job.model_validate({"name": "ping", "http": http,
                               **({"timeout": job_timeout} if job_timeout else {})})


def run(j: Job, cancel: threading.Event | None = None) -> Outcome:
    return execute(j, CTX, cancel)


# -- what a fire sends --------------------------------------------------------------------------
def test_a_fire_sends_one_request_named_by_its_fire_with_the_body_filled_in() -> None:
    body = {"fire": "{{fire_id}}", "at": "{{scheduled_at}}", "payload": "{{payload}}",
            "note": "{{job}} attempt {{ attempt }} of {{payload}}", "n": 3}
    with http_receiver() as hook:
        hook.answer = b'{"queued": true}'
        outcome = run(job(url=f"{hook.url}/run", body=body, headers={"X-Team": "billing"}))
    assert (outcome.status, outcome.error) == ("ok", None)
    assert outcome.output == 'HTTP/1.0 200 OK\n{"queued": true}'
    [got] = hook.received
    assert (got.method, got.path) == ("POST", "/run")
    assert got.headers["Idempotency-Key"] == CTX.fire_id
    assert got.headers["X-Cronsvc-Fire-Id"] == CTX.fire_id
    assert got.headers["X-Cronsvc-Job"] == "ping"
    assert got.headers["X-Cronsvc-Scheduled-At"] == iso_utc(AT_MS) == "2025-11-22T17:00:00Z"
    assert got.headers["X-Cronsvc-Attempt"] == "2"
    assert got.headers["X-Team"] == "billing"
    assert got.headers["Content-Type"] == "application/json"
    assert json.loads(got.body) == {"fire": CTX.fire_id, "at": "2025-11-22T17:00:00Z",
                                    "payload": {"order": 7}, "n": 3,
                                    "note": 'ping attempt 2 of {"order": 7}'}


def test_without_a_body_it_is_a_get_and_a_text_body_is_sent_as_text() -> None:
    with http_receiver() as hook:
        assert run(job(url=hook.url)).status == "ok"
        assert run(job(url=hook.url, method="put", body="fire {{fire_id}}")).status == "ok"
    get, put = hook.received
    assert (get.method, get.body) == ("GET", b"")
    assert (put.method, put.body) == ("PUT", f"fire {CTX.fire_id}".encode())
    assert put.headers["Content-Type"] == "text/plain; charset=utf-8"


def test_the_body_shown_is_the_tail_after_the_status_line() -> None:
    with http_receiver() as hook:
        hook.answer = b"head" + b"x" * 10_000 + b"tail"
        outcome = run(job(url=hook.url))
    assert outcome.output.startswith("HTTP/1.0 200 OK\nxxx")
    assert outcome.output.endswith("xtail") and len(outcome.output) == 4096


# -- ${VAR}: filled in when sending, kept as written everywhere else ---------------------------
def test_variables_are_read_when_sending_and_never_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("H27_PATH", "tenant-42")
    monkeypatch.setenv("H27_TOKEN", "s3cret-t0ken")
    with http_receiver() as hook:
        hook.answer = b"you sent Bearer s3cret-t0ken"  # an answer that echoes the secret
        j = job(url=f"{hook.url}/api/${{H27_PATH}}/run",
                headers={"Authorization": "Bearer ${H27_TOKEN}"})
        outcome = run(j)
    [got] = hook.received
    assert got.path == "/api/tenant-42/run"
    assert got.headers["Authorization"] == "Bearer s3cret-t0ken"
    assert outcome.output == "HTTP/1.0 200 OK\nyou sent Bearer ${H27_TOKEN}"
    shown = KIND.shown(j)
    assert shown["url"] == f"{hook.url}/api/${{H27_PATH}}/run"
    assert shown["headers"] == {"Authorization": "Bearer ${H27_TOKEN}"}
    assert "s3cret" not in json.dumps(j.model_dump(mode="json"))


def test_a_missing_variable_fails_the_run_by_its_name(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("H27_MISSING", raising=False)
    with http_receiver() as hook:
        outcome = run(job(url=hook.url, headers={"Authorization": "Bearer ${H27_MISSING}"}))
    assert outcome.status == "failed"
    assert outcome.error == ("jobs.ping.http.headers.Authorization: environment variable "
                             "H27_MISSING is not set")
    assert hook.received == []


def test_an_unreachable_url_is_named_as_written(monkeypatch: pytest.MonkeyPatch) -> None:
    port = free_port()
    monkeypatch.setenv("H27_PORT", str(port))
    outcome = run(job(url="http://127.0.0.1:${H27_PORT}/run"))
    assert outcome.status == "failed"
    assert outcome.error is not None and "\n" not in outcome.error
    assert outcome.error.startswith("cannot reach http://127.0.0.1:${H27_PORT}/run: ")
    assert str(port) not in outcome.error


# -- the answer ----------------------------------------------------------------------------------
def test_a_status_not_expected_fails_with_it() -> None:
    with http_receiver() as hook:
        hook.statuses = [503, 404, 204]
        listed = run(job(url=hook.url, expect=[200, 204]))
        default = run(job(url=hook.url))
        no_content = run(job(url=hook.url, expect=204))
    assert (listed.status, listed.error) == ("failed",
                                             "HTTP 503 Service Unavailable (expected 200, 204)")
    assert listed.output == "HTTP/1.0 503 Service Unavailable\nok"
    assert (default.status, default.error) == ("failed", "HTTP 404 Not Found (expected 2xx)")
    assert (no_content.status, no_content.error) == ("ok", None)


def test_a_redirect_is_not_followed() -> None:
    with http_receiver() as hook, http_receiver() as elsewhere:
        hook.statuses = [302]
        hook.location = f"{elsewhere.url}/login?token=abc"
        outcome = run(job(url=hook.url, body={"fire": "{{fire_id}}"}))
        assert elsewhere.received == []
    assert len(hook.received) == 1
    assert outcome.status == "failed"
    assert outcome.error == (f"HTTP 302 Found (expected 2xx): a redirect to {elsewhere.url}, "
                             "not followed")


def test_certificates_are_checked(tmp_path: Path, trusted_tls: ssl.SSLContext) -> None:
    with http_receiver(trusted_tls) as hook:
        assert run(job(url=hook.url)).status == "ok"
    with http_receiver(server_context(tmp_path)) as self_signed:
        outcome = run(job(url=self_signed.url))
    assert outcome.status == "failed"
    assert outcome.error is not None and "certificate verify failed" in outcome.error
    assert self_signed.received == []


def test_a_thread_reuses_its_connection_and_keeps_no_cookie() -> None:
    with http_receiver() as hook:
        hook.keep_alive = True
        hook.cookie = "session=abc; Path=/"
        outcomes = [run(job(url=f"{hook.url}/run")) for _ in range(3)]
        assert [o.status for o in outcomes] == ["ok"] * 3
        first, *later = hook.received
        assert [got.peer for got in later] == [first.peer] * 2  # one connection
        assert ["Cookie" in got.headers for got in hook.received] == [False] * 3


def test_a_request_after_a_stopped_one_starts_afresh() -> None:
    with http_receiver() as hook:
        hook.keep_alive = True
        assert run(job(url=hook.url)).status == "ok"
        hook.stall = True
        assert run(job("1s", url=hook.url)).status == "timeout"
        wait_for(hook.gone.is_set)
        hook.stall = False
        assert run(job(url=hook.url)).status == "ok"
        first, stalled, after = hook.received
        assert stalled.peer == first.peer  # the kept connection, until the stop closed it
        assert after.peer != first.peer


# -- what ends a request -------------------------------------------------------------------------
def test_the_jobs_timeout_ends_a_request_that_gets_no_answer() -> None:
    with http_receiver() as hook:
        hook.stall = True
        outcome = run(job("1s", url=hook.url))
        assert (outcome.status, outcome.error) == ("timeout", "timed out after 1s")
        wait_for(hook.gone.is_set)  # the connection was closed, not left to hang


def test_the_requests_own_timeout_fails_it() -> None:
    with http_receiver() as hook:
        hook.stall = True
        outcome = run(job("1m", url=hook.url, timeout="1s"))
        assert (outcome.status, outcome.error) == (
            "failed", f"cannot reach {hook.url}: no answer within 1s")
        wait_for(hook.gone.is_set)


def test_a_cancel_ends_a_request_in_flight() -> None:
    cancel = threading.Event()
    outcomes: list[Outcome] = []
    with http_receiver() as hook:
        hook.stall = True
        runner = threading.Thread(target=lambda: outcomes.append(
            run(job("1m", url=hook.url), cancel)))
        runner.start()
        wait_for(lambda: hook.received)
        cancel.set()
        runner.join(20)
        assert [(o.status, o.error) for o in outcomes] == [("cancelled", "cancelled")]
        wait_for(hook.gone.is_set)


# -- the job file --------------------------------------------------------------------------------
BROKEN = """\
jobs:
  a:
    every: 1m
    http:
      url: ftp://files.example/run
      method: FETCH
      expect: [200, 700]
      body: {fire: "{{fireid}}"}
  b:
    every: 1m
    http:
      url: http://billing.example/run
      headers: {Authorization: "Bearer ${TOKEN}"}
  c:
    every: 1m
    http:
      method: GET
      url: http://127.0.0.1:8080/run
      headers: {Authorization: "Bearer ${TOKEN}", X-Cronsvc-Job: other}
      body: "{{payload}}"
  d:
    every: 1m
    http: {method: POST}
"""


def test_validate_locates_each_mistake(tmp_path: Path) -> None:
    path = tmp_path / "schedules.yaml"
    path.write_text(BROKEN)
    result = CliRunner().invoke(main, ["validate", "--config", str(path)])
    assert result.exit_code == 1
    assert result.stderr.splitlines() == [
        f"{path}:5: jobs.a.http.url: expected a URL starting http:// or https://",
        f"{path}:6: jobs.a.http.method: 'FETCH': not an HTTP method: expected one of GET, "
        "HEAD, POST, PUT, PATCH, DELETE, OPTIONS",
        f"{path}:7: jobs.a.http.expect[1]: 700: not an HTTP status: expected 100 to 599",
        f"{path}:8: jobs.a.http.body: unknown placeholder {{{{fireid}}}}: expected one of "
        "{{fire_id}}, {{job}}, {{scheduled_at}}, {{attempt}}, {{payload}}; did you mean "
        "'fire_id'?",
        f"{path}:12: jobs.b.http.url: an Authorization header would travel unencrypted: use "
        "https:// (http:// only to a loopback host)",
        f"{path}:19: jobs.c.http.headers: X-Cronsvc-Job: set by cronsvc on every request, "
        "from the fire",
        f"{path}:20: jobs.c.http.body: '{{{{payload}}}}': a GET request sends no body: set "
        "method POST, PUT or PATCH (or leave it out: POST with a body)",
        f"{path}:23: jobs.d.http.url: missing (required)",
    ]
    assert "Traceback" not in result.output


def test_credentials_written_in_the_file_are_warned_of_and_not_shown(tmp_path: Path) -> None:
    path = tmp_path / "schedules.yaml"
    path.write_text("jobs:\n  a:\n    every: 1m\n    http:\n"
                    "      url: https://svc:hunter2@billing.example/run\n"
                    "      headers: {Authorization: Bearer abc123, X-Token: \"${T}\"}\n")
    result = CliRunner().invoke(main, ["validate", "--config", str(path)])
    assert result.exit_code == 0, result.output
    instead = ("write ${NAME} instead and set NAME in the workers' environment, so the "
               "secret stays out of the file and its history")
    assert result.stderr.splitlines() == [
        f"{path}:5: warning: jobs.a.http.url: a password written in the file: {instead}",
        f"{path}:6: warning: jobs.a.http.headers.Authorization: a credential written in the "
        f"file: {instead}",
    ]
    j = job(url="https://svc:hunter2@billing.example/run",
            headers={"Authorization": "Bearer abc123", "X-Token": "${T}"})
    assert KIND.shown(j) == {
        "url": "https://svc:***@billing.example/run", "method": "GET",
        "headers": {"Authorization": "(written in the file, not shown)", "X-Token": "${T}"},
        "body": None, "request_timeout": 30.0, "expect": "2xx"}


def test_the_trust_store_is_loaded_once_and_again_when_it_is_another(
        tmp_path: Path, trusted_tls: ssl.SSLContext, monkeypatch: pytest.MonkeyPatch) -> None:
    with http_receiver(trusted_tls) as hook:
        assert [run(job(url=hook.url)).status for _ in range(2)] == ["ok", "ok"]
    assert trust_store_context("http") is trust_store_context("http")
    assert trust_store_context("smtp") is not trust_store_context("http")
    # Another store named: its CA is trusted, the one before no longer.
    other = new_ca()
    (tmp_path / "other").mkdir()
    monkeypatch.setenv("SSL_CERT_FILE", str(trust_file(tmp_path / "other", other)))
    with http_receiver(server_context(tmp_path / "other", signer=other)) as hook:
        assert run(job(url=hook.url)).status == "ok"
    with http_receiver(trusted_tls) as before:
        outcome = run(job(url=before.url))
    assert outcome.error is not None and "certificate verify failed" in outcome.error
