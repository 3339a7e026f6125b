"""The HTTP API against a real `cronsvc web` process and a real redis-server, with httpx:
every resource, its errors as JSON with the right status, tokens and the audit log."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis
import yaml

from cronsvc.client.client import Client
from cronsvc.fires import fire_id
from cronsvc.keys import Keys
from cronsvc.process.redis_server import RedisServer
from cronsvc.store.scripts import Scripts
from cronsvc.testing import WebServer, published
from cronsvc.web.models import JobItem
from tests.support.paths import ROOT
from tests.support.wait import server_ms

pytestmark = pytest.mark.slow
K = Keys()
OPERATOR = "operator-secret-0123456789"
READER = "reader-secret-0123456789"
JOBS: dict[str, Any] = {
    **{f"job-{i:02d}": {"cron": f"{i} 3 * * *", "command": ["true"], "tags": ["batch"]}
       for i in range(12)},
    "nightly": {"cron": "0 2 * * *", "timezone": "Europe/Berlin", "command": ["backup.sh"],
                "env": {"DB_PASSWORD": "s3cret"}, "description": "the backup",
                "tags": ["ops"]},
    "digest": {"call": "cronsvc.examples:ping"},
}


@pytest.fixture(scope="module")
def config(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("api") / "schedules.yaml"
    path.write_text(yaml.safe_dump({"jobs": JOBS}))
    return path


@pytest.fixture(scope="module")
def web(tmp_path_factory: pytest.TempPathFactory, redis_server: RedisServer,
        config: Path) -> Iterator[WebServer]:
    env = {"CRONSVC_WEB_TOKEN": OPERATOR, "CRONSVC_WEB_READ_TOKEN": READER}
    with WebServer(tmp_path_factory.mktemp("web"), redis_server.url, config, env=env) as w:
        yield w


@pytest.fixture
def client(redis_url: str, config: Path) -> Client:
    return published(redis_url, config)


@pytest.fixture
def api(web: WebServer, client: Client) -> Iterator[httpx.Client]:
    with web.client(OPERATOR) as http:
        yield http


def error(reply: httpx.Response, status: int) -> str:
    assert reply.status_code == status, reply.text
    body = reply.json()
    assert body["status"] == status and "Traceback" not in reply.text
    return str(body["error"])


def test_jobs_come_in_pages_with_filters(api: httpx.Client) -> None:
    first = api.get("/api/v1/jobs", params={"limit": 5}).json()
    assert [j["name"] for j in first["items"]] == ["digest", "job-00", "job-01", "job-02",
                                                  "job-03"]
    assert first["total"] == 14 and first["cursor"]
    names, cursor = [], None
    while True:
        page = api.get("/api/v1/jobs", params={"limit": 5, "cursor": cursor}).json()
        names += [j["name"] for j in page["items"]]
        cursor = page["cursor"]
        if cursor is None:
            break
    assert names == sorted(JOBS)
    assert [j["name"] for j in api.get("/api/v1/jobs", params={"q": "nigh"}).json()["items"]] \
        == ["nightly"]
    tagged = api.get("/api/v1/jobs", params={"tag": "ops"}).json()["items"]
    assert [(j["name"], j["tags"], j["summary"]) for j in tagged] == [
        ("nightly", ["ops"], "the backup")]
    assert api.post("/api/v1/jobs/job-03/pause").status_code == 200
    paused = api.get("/api/v1/jobs", params={"status": "paused"}).json()["items"]
    assert [j["name"] for j in paused] == ["job-03"]
    assert "status" in error(api.get("/api/v1/jobs", params={"status": "weird"}), 422)


def test_a_status_filter_counts_what_it_matches_on_every_page(api: httpx.Client) -> None:
    for name in ("job-01", "job-05", "job-09"):
        assert api.post(f"/api/v1/jobs/{name}/pause").status_code == 200
    pages, cursor = [], None
    while True:
        page = api.get("/api/v1/jobs", params={"status": "paused", "limit": 2,
                                               "cursor": cursor}).json()
        pages.append(([j["name"] for j in page["items"]], page["total"]))
        if (cursor := page["cursor"]) is None:
            break
    assert pages == [(["job-01", "job-05"], 3), (["job-09"], 3)]
    never = api.get("/api/v1/jobs", params={"status": "never", "tag": "batch"}).json()
    assert never["total"] == 9 and len(never["items"]) == 9


def test_a_job_says_its_schedule_in_words_and_its_description_apart(
        api: httpx.Client) -> None:
    job = api.get("/api/v1/jobs/nightly").json()
    assert (job["schedule_words"], job["description"], job["summary"]) == (
        "at 02:00 every day", "the backup", "the backup")  # summary: the old name, deprecated
    (listed,) = api.get("/api/v1/jobs", params={"q": "nightly"}).json()["items"]
    assert set(job) - set(listed) == {"definition", "next"}
    assert set(listed) == set(JobItem.model_fields)


def test_openapi_types_each_page_s_items(api: httpx.Client) -> None:
    spec = api.get("/api/openapi.json").json()
    schemas = spec["components"]["schemas"]

    def items_of(path: str) -> Any:
        ref = spec["paths"][path]["get"]["responses"]["200"]["content"]["application/json"][
            "schema"]["$ref"].rsplit("/", 1)[1]
        return schemas[ref]["properties"]["items"]["items"]

    assert items_of("/api/v1/jobs") == {"$ref": "#/components/schemas/JobItem"}
    assert items_of("/api/v1/dead") == {"$ref": "#/components/schemas/DeadItem"}
    assert items_of("/api/v1/audit") == {"$ref": "#/components/schemas/AuditItem"}
    job = schemas["JobItem"]["properties"]
    assert job["summary"]["deprecated"] is True and "schedule_words" in job
    detail = spec["paths"]["/api/v1/jobs/{name}"]["get"]["responses"]["200"]
    assert detail["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/JobDetail"}


def test_a_body_that_is_not_json_is_located(api: httpx.Client) -> None:
    reply = api.post("/api/v1/jobs/digest/trigger", content=b'{"note": "x",\n "payload" 1}',
                     headers={"Content-Type": "application/json"})
    assert error(reply, 422) == "body: not JSON at line 2, column 12: Expecting ':' delimiter"


def test_a_job_with_its_definition_but_never_its_secrets(api: httpx.Client,
                                                         config: Path) -> None:
    job = api.get("/api/v1/jobs/nightly").json()
    assert (job["timezone"], job["definition"]["command"], job["definition"]["env"]) == (
        "Europe/Berlin", ["backup.sh"], ["DB_PASSWORD"])
    # Where the job is written: the line of its name in the file.
    source, line = job["definition"]["declared_at"].rsplit(":", 1)
    assert source == str(config)
    assert config.read_text().splitlines()[int(line) - 1] == "  nightly:"
    assert "s3cret" not in api.get("/api/v1/jobs/nightly").text
    assert len(job["next"]) == 5 and job["next"][0]["at"].endswith("Z")
    fires = api.get("/api/v1/jobs/nightly/next", params={"count": 3}).json()
    assert [f["local"][11:19] for f in fires] == ["02:00:00"] * 3
    assert "did you mean" in error(api.get("/api/v1/jobs/nightli"), 404)


def test_pause_resume_trigger_and_at_change_redis_and_the_audit_log(
        api: httpx.Client, client: Client) -> None:
    assert api.post("/api/v1/jobs/nightly/pause", json={"note": "db upgrade"}).status_code == 200
    assert client.job("nightly").paused and client.job("nightly").pause_note == "db upgrade"
    assert api.post("/api/v1/jobs/nightly/resume").json()["resumed"] is True
    assert not client.job("nightly").paused
    fid = api.post("/api/v1/jobs/digest/trigger", json={"payload": {"n": 1}}).json()["fire"]
    assert client.fire_state(fid) == "queued"
    later = api.post("/api/v1/jobs/digest/at",
                     json={"when": "2030-01-01T09:00:00+01:00", "note": "new year"}).json()
    assert later["fire"] == fire_id("digest", 1893484800000, later["fire"].split("#")[1])
    cancelled = api.post(f"/api/v1/fires/{later['fire'].replace('#', '%23')}/cancel")
    assert cancelled.json() == {"fire": later["fire"], "cancelled": True}
    assert "not queued" in error(
        api.post(f"/api/v1/fires/{later['fire'].replace('#', '%23')}/cancel"), 409)
    log = api.get("/api/v1/audit", params={"limit": 10}).json()["items"]
    assert [(a["actor"], a["action"], a["target"]) for a in log][:5] == [
        ("web:operator", "cancel", later["fire"]), ("web:operator", "at", "digest"),
        ("web:operator", "trigger", "digest"), ("web:operator", "resume", "nightly"),
        ("web:operator", "pause", "nightly")]
    assert log[4]["note"] == "db upgrade" and log[0]["at"].endswith("Z")


def test_bad_requests_name_the_field(api: httpx.Client) -> None:
    assert "when" in error(api.post("/api/v1/jobs/digest/at", json={"when": "tomorrow"}), 400)
    assert "zone" in error(api.post("/api/v1/jobs/digest/at",
                                    json={"when": "2030-01-01T09:00:00"}), 400)
    assert "when" in error(api.post("/api/v1/jobs/digest/at", json={}), 422)
    assert "note" in error(api.post("/api/v1/jobs/digest/pause", json={"note": "x" * 2000}), 422)
    assert "cron" in error(api.put("/api/v1/schedules/s1", json={"job": "digest",
                                                                  "cron": "61 * * * *"}), 400)
    assert "unknown job" in error(api.put("/api/v1/schedules/s1", json={"job": "nope",
                                                                         "every": "1h"}), 400)
    assert "timezone" in error(api.put("/api/v1/schedules/s1", json={
        "job": "digest", "every": "1h", "timezone": "Mars/Olympus"}), 400)
    assert "not a fire id" in error(api.get("/api/v1/fires/nonsense"), 400)
    assert error(api.get("/api/v1/nothing-here"), 404)


def test_big_payloads_past_times_and_pages_beyond_the_log_are_400(api: httpx.Client,
                                                                   client: Client) -> None:
    big = "x" * 70_000
    for path, body in (("trigger", {}), ("at", {"when": "2030-01-01T09:00:00Z"})):
        assert error(api.post(f"/api/v1/jobs/digest/{path}", json={**body, "payload": big}),
                     400) == "digest: payload: 70,002 bytes as JSON; at most 65,536"
    for when in ("2020-01-01T00:00:00Z", 1577836800000):
        assert error(api.post("/api/v1/jobs/digest/at", json={"when": when}), 400) == (
            "digest: due time 1577836800000 ms is in the past")
    view = client.queue()
    assert view.due_count == view.ahead_count == 0
    assert error(api.get("/api/v1/audit", params={"cursor": str(10**30)}), 400) == (
        f"cursor {10**30}: not one a page gave (0 to 10000)")
    assert error(api.get("/api/v1/schedules", params={"cursor": f"0:{10**30}"}), 400) == (
        f"cursor '0:{10**30}': not one this listing gave")


def test_dead_letters_retry_one_or_many_and_purge(api: httpx.Client, client: Client,
                                                  r: redis.Redis) -> None:
    s = Scripts(r)
    due = server_ms(r) - 3_600_000
    dead = []
    for n in range(3):
        fid = fire_id("digest", due + n, f"a{n:06d}")
        s.enqueue(K, fid, due + n, None)
        (c,) = s.claim(K, "w1", now_ms=due + n).claimed
        record = {"fire": fid, "job": "digest", "status": "failed", "reason": "boom",
                  "scheduled": due + n, "started": due + n, "attempt": c.token}
        assert s.fail(K, fid, c.token, "digest", record, 100, 1, 0, now_ms=due + n).verdict \
            == "dead"
        dead.append(fid)
    listed = api.get("/api/v1/dead", params={"limit": 2}).json()
    assert listed["total"] == 3 and len(listed["items"]) == 2 and listed["cursor"] == "2"
    assert listed["items"][0]["last"]["reason"].endswith("boom")
    assert api.post(f"/api/v1/dead/{dead[0].replace('#', '%23')}/retry").json()["retried"]
    many = api.post("/api/v1/dead/retry", json={"fires": [dead[1], dead[0]]}).json()
    assert [x["retried"] for x in many["results"]] == [True, False]
    assert "not dead" in many["results"][1]["error"]
    assert {client.fire_state(f) for f in dead[:2]} == {"queued"}
    assert api.post("/api/v1/dead/purge", json={"fires": [dead[2]]}).json() == {"purged": 1}
    assert client.dead() == []


def test_runtime_schedules_from_the_api(api: httpx.Client, client: Client) -> None:
    body = {"job": "digest", "every": "90m", "payload": {"user": 42}, "timezone": "Asia/Tokyo"}
    created = api.put("/api/v1/schedules/digest:user-42", json=body)
    assert created.status_code == 201 and created.json()["outcome"] == "created"
    again = api.put("/api/v1/schedules/digest:user-42", json=body)
    assert again.status_code == 200 and again.json()["outcome"] == "unchanged"
    got = api.get("/api/v1/schedules/digest:user-42").json()
    assert (got["every_ms"], got["payload"], got["actor"]) == (5_400_000, {"user": 42},
                                                              "web:operator")
    for n in range(5):
        api.put(f"/api/v1/schedules/team/{n}", json={"job": "digest", "cron": "0 9 * * 1"})
    assert api.get("/api/v1/schedules/team/3").json()["cron"] == "0 9 * * 1"
    seen, cursor = [], None
    while True:
        page = api.get("/api/v1/schedules", params={"limit": 2, "cursor": cursor,
                                                    "job": "digest"}).json()
        seen += [s["id"] for s in page["items"]]
        cursor = page["cursor"]
        if cursor is None:
            break
    assert sorted(seen) == ["digest:user-42", *(f"team/{n}" for n in range(5))]
    assert api.get("/api/v1/schedules", params={"job": "digest"}).json()["total"] == 6
    assert api.post("/api/v1/schedules/team/1/pause").json()["outcome"] == "changed"
    assert client.get_schedule("team/1").paused
    assert api.delete("/api/v1/schedules/team/1").json()["deleted"]
    assert "no schedule" in error(api.delete("/api/v1/schedules/team/1"), 404)
    assert "no schedule" in error(api.get("/api/v1/schedules/team/1"), 404)


def test_status_queue_and_docs(api: httpx.Client, web: WebServer) -> None:
    status = api.get("/api/v1/status").json()
    assert status["redis_version"] and isinstance(status["warnings"], list)
    queue = api.get("/api/v1/queue").json()
    assert {"due", "ahead", "in_flight", "lateness_ms"} <= set(queue)
    docs = api.get("/api/docs").text
    assert "/static/vendor/swagger-ui/swagger-ui-bundle.js" in docs
    assert "http://" not in docs and "https://" not in docs  # nothing from a CDN
    assert httpx.get(f"{web.url}/static/vendor/swagger-ui/swagger-ui-bundle.js").status_code \
        == 200
    paths = api.get("/api/openapi.json").json()["paths"]
    assert {"/api/v1/jobs", "/api/v1/jobs/{name}/pause", "/api/v1/dead/retry",
            "/api/v1/schedules/{sid}", "/api/v1/audit"} <= set(paths)


def test_tokens_read_and_operator(web: WebServer, client: Client) -> None:
    with web.client() as anonymous, web.client(READER) as reader, \
            web.client("not-a-token-at-all") as stranger:
        assert "sign in" in error(anonymous.get("/api/v1/jobs"), 401)
        assert error(stranger.get("/api/v1/jobs"), 401)
        assert reader.get("/api/v1/jobs").status_code == 200
        assert "read-only" in error(reader.post("/api/v1/jobs/nightly/pause"), 403)
        assert not client.job("nightly").paused
        # A browser form from another site is refused even with a cookie.
    with web.signed_in(OPERATOR) as signed_in:
        forged = signed_in.post("/jobs/nightly/pause", data={"to": "/jobs"},
                                headers={"Origin": "http://evil.example"})
        assert forged.status_code == 403 and not client.job("nightly").paused
        no_csrf = signed_in.post("/jobs/nightly/pause", data={"to": "/jobs"})
        assert no_csrf.status_code == 403 and not client.job("nightly").paused


def test_503_when_redis_is_unreachable(tmp_path: Path, fresh_server: Any,
                                       config: Path) -> None:
    server = fresh_server()
    Client(server.url, config=str(config)).publish_config()
    with WebServer(tmp_path, server.url, config) as web, web.client() as http:
        assert http.get("/api/v1/jobs").status_code == 200
        server.kill()
        assert "Redis is unreachable" in error(http.get("/api/v1/jobs"), 503)
        assert "Redis" in error(http.post("/api/v1/jobs/nightly/pause"), 503)


def test_a_public_address_without_a_token_is_refused(tmp_path: Path, redis_url: str,
                                                    config: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CRONSVC_WEB_")}
    env["PYTHONPATH"] = str(ROOT)
    done = subprocess.run([sys.executable, "-m", "cronsvc", "web", "--config", str(config),
                           "--redis-url", redis_url, "--host", "0.0.0.0", "--port", "0"],
                          capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [
        "refusing to serve the web on 0.0.0.0 without a token: set CRONSVC_WEB_TOKEN (or "
        "pass --token-file), or serve on 127.0.0.1"]


def test_a_token_file_names_its_tokens(tmp_path: Path, redis_url: str, config: Path,
                                       client: Client) -> None:
    tokens = tmp_path / "tokens"
    tokens.write_text("# name role secret\nci operator ci-secret-0123456789\n"
                      "grafana read grafana-secret-012345\n")
    with WebServer(tmp_path, redis_url, config, "--token-file", str(tokens)) as web, \
            web.client("ci-secret-0123456789") as ci:
        assert ci.post("/api/v1/jobs/nightly/pause").status_code == 200
        assert client.audit(limit=1).actions[0].actor == "web:ci"
    tokens.write_text("ci admin short\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("CRONSVC_WEB_")}
    env["PYTHONPATH"] = str(ROOT)
    done = subprocess.run([sys.executable, "-m", "cronsvc", "web", "--config", str(config),
                           "--redis-url", redis_url, "--token-file", str(tokens)],
                          capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 1 and done.stderr.strip() == (
        f"{tokens}:1: expected 'name role secret' with role read or operator")
