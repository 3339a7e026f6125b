"""One rule for who acted, the same in a runtime schedule's record and in the audit log:
``cli:<OS user>`` from the commands ($USER set or not), ``client:<OS user>`` from the
Python Client, ``web:<token name>`` from the API, or the actor a caller names."""

from __future__ import annotations

import getpass
import subprocess
import sys
from pathlib import Path

import pytest

from cronsvc.client.client import Client
from cronsvc.testing import WebServer, published
from cronsvc.testing.children import child_env
from tests.support.web import one_job_file

pytestmark = pytest.mark.slow


def test_a_schedule_and_the_audit_log_name_the_same_actor(
        tmp_path: Path, redis_url: str) -> None:
    config = one_job_file(tmp_path)
    client = published(redis_url, config)
    job = client.published_jobs()[0]
    me = getpass.getuser()
    env = {k: v for k, v in child_env().items() if k not in ("USER", "LOGNAME")}

    def add(sid: str, *args: str) -> None:
        done = subprocess.run([sys.executable, "-m", "cronsvc", "schedule", "add", sid,
                               "--job", job, "--every", "1h", "--config", str(config),
                               "--redis-url", redis_url, *args], capture_output=True,
                              text=True, env=env, timeout=60)
        assert done.returncode == 0, done.stderr

    add("from-cli")  # $USER and $LOGNAME unset: the user of the uid
    add("named", "--actor", "ops-team")
    Client(redis_url, config=str(config)).upsert_schedule("from-python", job=job, every="1h")
    client.upsert_schedule("for-signup", job=job, every="1h", actor="signup")
    token = "api-token-for-actors"
    with WebServer(tmp_path, redis_url, config, env={"CRONSVC_WEB_TOKEN": token}) as web, \
            web.client(token) as api:
        reply = api.put("/api/v1/schedules/from-web", json={"job": job, "every": "1h"})
        assert reply.status_code in (200, 201), reply.text
    audited = {a.target: a.actor for a in client.audit(limit=20).actions
               if a.action == "schedule-set"}
    recorded = {sid: client.get_schedule(sid).actor for sid in audited}
    assert recorded == audited == {
        "from-cli": f"cli:{me}", "named": "ops-team", "from-python": f"client:{me}",
        "for-signup": "signup", "from-web": "web:operator"}
