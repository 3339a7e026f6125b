"""`cronsvc up`: planner, workers and an embedded redis-server from one command."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import redis
import yaml

from tests.conftest import wait_for
from tests.e2e_jobs import read_ledger
from tests.fleet import ROOT

pytestmark = pytest.mark.slow


def test_up_runs_jobs_on_an_embedded_redis_and_stops_it_on_ctrl_c(tmp_path: Path) -> None:
    ledger = tmp_path / "ledger.jsonl"
    (tmp_path / "schedules.yaml").write_text(yaml.safe_dump({"jobs": {"tick": {
        "cron": "* * * * * *", "call": "tests.e2e_jobs:record",
        "kwargs": {"path": str(ledger)}}}}))
    env = {k: v for k, v in os.environ.items() if k not in ("CRONSVC_REDIS_URL", "CRONSVC_CONFIG")}
    env["PYTHONPATH"] = str(ROOT)
    log = tmp_path / "up.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "cronsvc", "up", "--workers", "1"],
                                cwd=tmp_path, env=env, stdout=out, stderr=out)
    try:
        wait_for(lambda: len(read_ledger(ledger)) >= 2, timeout=40,
                 message="two runs of the every-second job")
        url = (tmp_path / ".cronsvc" / "redis.url").read_text().strip()
        wait_for(lambda: " ok tick@" in log.read_text(), message="a run line on the console")
        proc.send_signal(signal.SIGINT)
        assert proc.wait(60) == 0, log.read_text()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert not (tmp_path / ".cronsvc" / "redis.url").exists()
    with pytest.raises(redis.ConnectionError):
        redis.Redis.from_url(url, socket_connect_timeout=1).ping()
    assert (tmp_path / ".cronsvc" / "redis").is_dir()  # the data stays for the next start
    assert "Traceback" not in log.read_text()
