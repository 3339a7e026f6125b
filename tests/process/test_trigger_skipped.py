"""A trigger the job's bounds would skip now is refused, saying why: the CLI exits 1, the
API answers 409 with JSON, the Client raises Skipped; nothing is queued. Once the run in
the way ends, a trigger runs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest

from cronsvc.errors import Skipped
from cronsvc.testing import BLOCK, Fleet, WebServer, read_ledger
from cronsvc.testing.children import child_env
from tests.support.wait import wait_for

pytestmark = pytest.mark.slow

OPERATOR = "op-token-for-the-trigger-test"


def started(fleet: Fleet, fid: str) -> bool:
    return any(e["fire"] == fid and e["event"] == "start" for e in read_ledger(fleet.ledger))


def test_a_trigger_the_limits_skip_is_refused_with_the_reason(
        tmp_path: Path, redis_url: str) -> None:
    block = {"cron": "0 3 * * *", "call": BLOCK, "kwargs": {"path": str(tmp_path / "ledger.jsonl")}}
    fleet = Fleet(tmp_path, redis_url, {"solo": {**block, "overlap": "forbid"},
                                        "capped": {**block, "max_concurrent": 1}})
    env = {"CRONSVC_WEB_TOKEN": OPERATOR}
    with fleet.running("w1"), WebServer(tmp_path, redis_url, fleet.config, env=env) as web, \
            web.client(OPERATOR) as api:
        client = fleet.client()
        wait_for(lambda: "solo" in client.published_jobs(), message="the jobs published")
        first = client.trigger("solo")
        wait_for(lambda: started(fleet, first), timeout=30, message="the first run")
        queued_before = client.queue().due_count
        # The CLI: the reason, exit 1, no fire id.
        done = subprocess.run([sys.executable, "-m", "cronsvc", "trigger", "solo", "--config",
                               str(fleet.config), "--redis-url", redis_url],
                              capture_output=True, text=True, env=child_env(), timeout=60)
        assert (done.returncode, done.stdout) == (1, ""), done
        assert done.stderr == (f"solo: not triggered: its limits would skip it now (overlap "
                               f"forbid: {first} is running); try again once the run ends\n")
        # The API: 409 with JSON.
        reply = api.post("/api/v1/jobs/solo/trigger", json={})
        assert reply.status_code == 409, reply.text
        assert reply.json() == {"error": done.stderr.strip(), "status": 409}
        # The page's "Run now": back to the page it came from, saying why.
        with httpx.Client(base_url=web.url) as page:
            page.get("/login")
            csrf = page.cookies["cronsvc_csrf"]
            page.post("/login", data={"token": OPERATOR, "next": "/jobs", "csrf": csrf})
            ran = page.post("/jobs/solo/trigger", data={"csrf": csrf, "to": "/jobs"})
            assert ran.status_code == 303, ran.text
            said = parse_qs(urlsplit(ran.headers["location"]).query)["msg"]
            assert said == [done.stderr.strip()]
        # The Client, on a max_concurrent bound.
        capped = client.trigger("capped")
        wait_for(lambda: started(fleet, capped), timeout=30, message="the capped run")
        with pytest.raises(Skipped, match=r"capped: not triggered: .*\(max_concurrent 1 "
                                          r"\(1 running\)\)"):
            client.trigger("capped")
        assert client.queue().due_count == queued_before  # nothing queued by the refusals
        # The run in the way ends: a trigger runs again.
        Path(fleet.release).touch()
        wait_for(lambda: client.fire_state(first) not in ("running", "queued"), timeout=30,
                 message="the first run to end")
        again = subprocess.run([sys.executable, "-m", "cronsvc", "trigger", "solo", "--config",
                                str(fleet.config), "--redis-url", redis_url],
                               capture_output=True, text=True, env=child_env(), timeout=60)
        assert again.returncode == 0 and again.stdout.startswith("solo@"), again
