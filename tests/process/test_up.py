"""`cronsvc up`: planner, workers and an embedded redis-server from one command."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import redis
import yaml

from cronsvc.process.redis_server import free_port
from cronsvc.testing import RECORD, history, read_ledger
from cronsvc.testing.children import child_env
from tests.support.paths import ROOT
from tests.support.wait import wait_for

pytestmark = pytest.mark.slow


def start_up(tmp_path: Path, jobs: dict[str, object], *args: str) -> subprocess.Popen[bytes]:
    """`cronsvc up` in ``tmp_path`` on ``jobs``, with no Redis URL: an embedded server (and
    the dashboard on a free port, unless ``args`` say otherwise)."""
    if "--no-web" not in args and "--web-port" not in args:
        args = (*args, "--web-port", str(free_port()))
    (tmp_path / "schedules.yaml").write_text(yaml.safe_dump({"jobs": jobs}))
    env = {k: v for k, v in os.environ.items() if k not in ("CRONSVC_REDIS_URL", "CRONSVC_CONFIG")}
    env["PYTHONPATH"] = str(ROOT)
    with open(tmp_path / "up.log", "wb") as out:
        return subprocess.Popen([sys.executable, "-m", "cronsvc", "up", *args],
                                cwd=tmp_path, env=env, stdout=out, stderr=out)


@contextmanager
def killed_if_left(proc: subprocess.Popen[bytes]) -> Iterator[subprocess.Popen[bytes]]:
    """``proc``, killed if the block leaves it running (a check failed first)."""
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def _get_json(url: str) -> object:
    import httpx

    try:
        reply = httpx.get(url, timeout=5)
    except httpx.TransportError:
        return None
    return reply.json() if reply.status_code == 200 else None


def test_up_runs_jobs_on_an_embedded_redis_and_stops_it_on_ctrl_c(tmp_path: Path) -> None:
    ledger = tmp_path / "ledger.jsonl"
    proc = start_up(tmp_path, {"tick": {"cron": "* * * * * *", "call": RECORD,
                                        "kwargs": {"path": str(ledger)}},
                               # The dashboard's address is told to the jobs, whatever port.
                               "health": {"every": "1s", "http": {
                                   "url": "${CRONSVC_WEB_URL}/healthz"}}}, "--workers", "1")
    log = tmp_path / "up.log"
    with killed_if_left(proc):
        wait_for(lambda: len(read_ledger(ledger)) >= 2, timeout=40,
                 message="two runs of the every-second job")
        url = (tmp_path / ".cronsvc" / "redis.url").read_text().strip()
        wait_for(lambda: " ok tick@" in log.read_text(), message="a run line on the console")
        # The dashboard's address, said once, serves the job.
        (dashboard,) = wait_for(lambda: re.findall(r"dashboard on (http://\S+)", log.read_text()),
                                message="the dashboard's address in the log")
        jobs = wait_for(lambda: _get_json(f"{dashboard}api/v1/jobs"), message="the dashboard")
        assert "tick" in json.dumps(jobs)
        wait_for(lambda: " ok health@" in log.read_text(), message="the dashboard's health")
        # Client() with no URL finds the embedded server, as the CLI does.
        found = subprocess.run([sys.executable, "-c", "from cronsvc import Client\n"
                                "c = Client()\nprint(c.redis.connection_pool.connection_kwargs"
                                "['port'], c.published_jobs())"], cwd=tmp_path, text=True,
                               env={k: v for k, v in child_env().items()
                                    if k != "CRONSVC_REDIS_URL"}, capture_output=True,
                               timeout=60)
        assert found.stdout.split(maxsplit=1) == [url.rsplit(":", 1)[1].split("/")[0],
                                                  "['health', 'tick']\n"], found
        proc.send_signal(signal.SIGINT)
        assert proc.wait(60) == 0, log.read_text()
    assert not (tmp_path / ".cronsvc" / "redis.url").exists()
    with pytest.raises(redis.ConnectionError):
        redis.Redis.from_url(url, socket_connect_timeout=1).ping()
    assert (tmp_path / ".cronsvc" / "redis").is_dir()  # the data stays for the next start
    assert "Traceback" not in log.read_text()


def test_up_hands_its_web_options_to_the_dashboard(tmp_path: Path) -> None:
    import httpx

    port = free_port()
    proc = start_up(tmp_path, {"tick": {"cron": "0 0 1 1 *", "command": ["true"]}},
                    "--workers", "0", "--web-port", str(port), "--allowed-host", "cron.local")
    try:
        wait_for(lambda: _get_json(f"http://127.0.0.1:{port}/healthz"), timeout=40,
                 message="the dashboard")
        url = f"http://127.0.0.1:{port}/api/v1/jobs"
        assert httpx.get(url, headers={"Host": "cron.local"}).status_code == 200
        assert httpx.get(url, headers={"Host": "attacker.example"}).status_code == 400
    finally:
        proc.send_signal(signal.SIGINT)
        assert proc.wait(60) == 0, (tmp_path / "up.log").read_text()


def test_up_on_a_taken_port_says_so_and_how_to_choose_another(tmp_path: Path,
                                                               redis_url: str) -> None:
    taken = socket.create_server(("127.0.0.1", 0))  # another program's server
    with taken:
        port = str(taken.getsockname()[1])
        proc = start_up(tmp_path, {"tick": {"cron": "* * * * *", "command": ["true"]}},
                        "--web-port", port)
        with killed_if_left(proc):
            assert proc.wait(60) == 1
        said = (tmp_path / "up.log").read_text()
        assert said == (f"cannot serve the web on 127.0.0.1:{port}: port {port} is taken "
                        "(another program listens on it); choose another with --web-port PORT "
                        "(make run PORT=...), or --no-web\n"), said
        assert not (tmp_path / ".cronsvc").exists()  # nothing started: no embedded Redis
        # `cronsvc web` names its own option.
        web = subprocess.run([sys.executable, "-m", "cronsvc", "web", "--config",
                              str(tmp_path / "schedules.yaml"), "--redis-url",
                              redis_url, "--port", port],
                             capture_output=True, text=True, cwd=tmp_path, timeout=60,
                             env={**os.environ, "PYTHONPATH": str(ROOT)})
        assert web.returncode != 0 and "choose another with --port PORT" in web.stderr, web


def test_up_hands_the_metrics_host_to_its_planner_and_workers(tmp_path: Path) -> None:
    proc = start_up(tmp_path, {"tick": {"cron": "0 3 * * *", "command": ["true"]}},
                    "--no-web", "--workers", "1", "--metrics-port", "0",
                    "--metrics-host", "0.0.0.0")
    log = tmp_path / "up.log"
    with killed_if_left(proc):
        said = wait_for(lambda: len(found := re.findall(r"metrics on http://(\S+):\d+/",
                                                        log.read_text())) == 2 and found,
                        timeout=40, message="the planner's and the worker's metrics")
        assert said == ["0.0.0.0", "0.0.0.0"], said
        proc.send_signal(signal.SIGINT)
        assert proc.wait(60) == 0, log.read_text()


def test_ctrl_c_on_up_lets_a_running_job_finish(tmp_path: Path) -> None:
    from cronsvc.client.client import Client

    ledger, release = tmp_path / "ledger.jsonl", tmp_path / "release"
    proc = start_up(tmp_path, {"slow": {
        "cron": "0 0 1 1 *", "call": "cronsvc.testing.ledger:block",
        "kwargs": {"path": str(ledger), "release": str(release)}}}, "--workers", "2")
    log = tmp_path / "up.log"
    with killed_if_left(proc):
        url_file = tmp_path / ".cronsvc" / "redis.url"
        wait_for(lambda: url_file.exists() and "published 1 job" in log.read_text(),
                 message="the embedded server and the published job")
        url = url_file.read_text().strip()
        client = Client(url)
        client.trigger("slow")
        wait_for(lambda: read_ledger(ledger), message="the run to start")
        proc.send_signal(signal.SIGINT)
        wait_for(lambda: "waiting up to" in log.read_text(),
                 message="the worker to wait for its running job")
        r = redis.Redis.from_url(url, decode_responses=True)
        release.touch()
        done = wait_for(lambda: history(r, "slow"), message="the run to be recorded")
        assert [h["status"] for h in done] == ["ok"], log.read_text()
        assert proc.wait(60) == 0, log.read_text()


def test_up_reload_runs_new_code_in_a_new_worker(tmp_path: Path) -> None:
    ledger = tmp_path / "ledger.jsonl"
    module = tmp_path / "mytasks.py"  # `up` runs in tmp_path: its workers import from there
    code = ("from cronsvc.testing.ledger import note\n\n\n"
            "def tick(path, ctx=None):\n    note(path, 'start', ctx, mark={!r})\n")
    module.write_text(code.format("v1"))
    proc = start_up(tmp_path, {"tick": {"every": "1s", "call": "mytasks:tick",
                                        "kwargs": {"path": str(ledger)}}},
                    "--workers", "1", "--no-web", "--reload")
    log = tmp_path / "up.log"
    with killed_if_left(proc):
        wait_for(lambda: read_ledger(ledger), timeout=40, message="a run of the old code")
        module.write_text(code.format("v22"))
        wait_for(lambda: any(e["mark"] == "v22" for e in read_ledger(ledger)), timeout=40,
                 message=f"a run of the new code\n{log.read_text()}")
        proc.send_signal(signal.SIGINT)
        assert proc.wait(60) == 0, log.read_text()
    text = log.read_text()
    assert re.search(r"code changed: mytasks\.py; new worker pid \d+ up, old worker pid", text)
    # The new worker has an id of its own beside the old one's.
    workers = {e["worker"] for e in read_ledger(ledger)}
    assert any(w.endswith("~2") for w in workers) and len(workers) == 2, workers
    assert "Traceback" not in text
