"""DNS rebinding against a real `cronsvc web`: a page of another site whose name now
resolves to the server's address sends that name in Host and Origin. The server answers
only to its own names (its loopback names on its port, its address, and --allowed-host),
and takes a browser's change only from a page of one of them."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from cronsvc.client.client import Client
from cronsvc.testing import WebServer
from tests.support.web import OPERATOR_TOKEN

pytestmark = pytest.mark.slow
TOKEN = OPERATOR_TOKEN


def refused(reply: httpx.Response) -> str:
    assert reply.status_code == 400, reply.text
    assert reply.json()["status"] == 400
    return str(reply.json()["error"])


def test_a_rebound_page_can_neither_read_nor_act_on_a_loopback_server(
        tmp_path: Path, redis_url: str, config: Path, client: Client) -> None:
    with WebServer(tmp_path, redis_url, config) as web, web.client() as http:
        evil = f"attacker.example:{web.port}"
        assert refused(http.get("/api/v1/jobs", headers={"Host": evil})) == (
            f"Host '{evil}' is not a name of this server: to serve under another name, start "
            "it with --allowed-host NAME (repeatable)")
        act = http.post("/api/v1/jobs/digest/trigger",
                        headers={"Host": evil, "Origin": f"http://{evil}"})
        assert refused(act) and client.queue().due_count == 0
        page = http.get("/jobs", headers={"Host": evil, "Accept": "text/html"})
        assert page.status_code == 400 and "is not a name of this server" in page.text
        assert refused(http.get("/api/v1/jobs", headers={"Host": f"localhost:{web.port + 1}"}))
        for name in ("localhost", "127.0.0.1", "[::1]"):
            assert http.get("/api/v1/jobs", headers={"Host": f"{name}:{web.port}"}) \
                .status_code == 200
        assert http.get("/healthz", headers={"Host": evil}).status_code == 200  # a probe's


def test_a_change_from_a_page_must_come_from_a_name_of_the_server(
        tmp_path: Path, redis_url: str, config: Path, client: Client) -> None:
    with WebServer(tmp_path, redis_url, config, "--allowed-host", "cron.example") as web, \
            httpx.Client(base_url=web.url) as browser:
        own = f"cron.example:{web.port}"
        browser.headers.update({"Host": own, "Accept": "text/html"})
        assert browser.get("/jobs").status_code == 200  # a page: its CSRF cookie
        form = {"csrf": browser.cookies["cronsvc_csrf"], "to": "/jobs"}
        foreign = browser.post("/jobs/digest/pause", data=form,
                               headers={"Origin": "http://attacker.example"})
        assert foreign.status_code == 403 and not client.job("digest").paused
        done = browser.post("/jobs/digest/pause", data=form, headers={"Origin": f"http://{own}"})
        assert done.status_code == 303 and client.job("digest").paused


def test_a_server_on_every_address_answers_only_to_the_names_it_is_told(
        tmp_path: Path, redis_url: str, config: Path, client: Client) -> None:
    with WebServer(tmp_path, redis_url, config, "--host", "0.0.0.0", "--allowed-host",
                   "cron.internal", env={"CRONSVC_WEB_TOKEN": TOKEN}) as web, \
            web.client(TOKEN) as http:
        assert refused(http.get("/api/v1/jobs", headers={"Host": f"10.9.8.7:{web.port}"})) == (
            f"Host '10.9.8.7:{web.port}' is not a name of this server: a server bound to every "
            "address knows no public name of its own: tell it each one with --allowed-host "
            "NAME (repeatable)")
        for host in ("cron.internal", "cron.internal:443", f"127.0.0.1:{web.port}"):
            assert http.get("/api/v1/jobs", headers={"Host": host}).status_code == 200
