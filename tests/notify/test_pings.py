"""Dead-man pings from a real worker process to a real local HTTP server, in
Healthchecks' form: URL/start when a run begins, URL when it succeeds, URL/fail with the
error and output when it fails; a monitor that hangs never holds a run back."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from cronsvc.client.client import Client
from cronsvc.config.models import Job
from cronsvc.testing import Fleet, history
from tests.support.receivers import HttpReceiver, http_receiver
from tests.support.wait import wait_for

pytestmark = pytest.mark.slow


@pytest.fixture
def monitor() -> Iterator[HttpReceiver]:
    with http_receiver() as receiver:
        yield receiver


@pytest.fixture
def fleet(tmp_path: Path, redis_url: str, monitor: HttpReceiver) -> Iterator[Fleet]:
    f = Fleet(tmp_path, redis_url, {
        "backup": {"command": ["true"], "ping": f"{monitor.url}/ping/backup-uuid"},
        "broken": {"command": ["sh", "-c", "echo disk full; exit 3"],
                   "ping": {"start": f"{monitor.url}/b/start", "fail": f"{monitor.url}/b/fail"}},
        "quiet": {"command": ["true"]},
        # Fails until its third attempt, or always: one verdict per fire either way.
        "flaky": {"command": ["sh", "-c", '[ "$CRONSVC_ATTEMPT" -ge 3 ]'], "retries": 2,
                  "backoff": "1s", "ping": f"{monitor.url}/flaky"},
        "doomed": {"command": ["false"], "retries": 2, "backoff": "1s",
                   "ping": f"{monitor.url}/doomed"},
    })
    with f.running("worker-1", planner=False):
        yield f


def paths(monitor: HttpReceiver) -> list[str]:
    return [r.path for r in monitor.received]


def test_a_plain_url_is_healthchecks_form() -> None:
    job = Job.model_validate({"name": "j", "command": ["true"],
                              "ping": "https://hc-ping.com/abc/"})
    assert job.ping is not None and (job.ping.start, job.ping.success, job.ping.fail) == (
        "https://hc-ping.com/abc/start", "https://hc-ping.com/abc", "https://hc-ping.com/abc/fail")


def test_a_run_pings_its_start_and_its_success_or_failure(
        fleet: Fleet, monitor: HttpReceiver, redis_url: str) -> None:
    client = Client(redis_url, config=str(fleet.config))
    client.publish_config()
    client.trigger("backup")
    wait_for(lambda: paths(monitor) == ["/ping/backup-uuid/start", "/ping/backup-uuid"],
             message="the start and success pings of backup")
    client.trigger("broken")
    wait_for(lambda: paths(monitor)[2:] == ["/b/start", "/b/fail"],
             message="the start and fail pings of broken")
    fail = monitor.received[3].body.decode()
    assert "disk full" in fail and "3" in fail
    client.trigger("quiet")
    wait_for(lambda: history(client.redis, "quiet"), message="the run of quiet")
    assert len(monitor.received) == 4  # a job without ping sends none


def test_fail_is_pinged_once_the_last_attempt_failed_not_before_a_retry(
        fleet: Fleet, monitor: HttpReceiver, redis_url: str) -> None:
    client = Client(redis_url, config=str(fleet.config))
    client.publish_config()
    client.trigger("flaky")
    client.trigger("doomed")
    for job in ("flaky", "doomed"):  # pings of one worker arrive in order: the last is last
        wait_for(lambda job=job: [p for p in paths(monitor) if p.startswith(f"/{job}")][-1:]
                 in ([f"/{job}"], [f"/{job}/fail"]), timeout=40,
                 message=f"the verdict ping of {job}")
    assert [p for p in paths(monitor) if p.startswith("/flaky")] == [
        "/flaky/start", "/flaky/start", "/flaky/start", "/flaky"]
    assert [p for p in paths(monitor) if p.startswith("/doomed")] == [
        "/doomed/start", "/doomed/start", "/doomed/start", "/doomed/fail"]
    assert sorted(h["status"] for h in history(client.redis, "doomed")) == [
        "dead", "failed", "failed", "failed"]


def test_a_hanging_monitor_does_not_hold_a_run_back(
        fleet: Fleet, monitor: HttpReceiver, redis_url: str) -> None:
    monitor.hang = threading.Event()  # every request waits until released
    client = Client(redis_url, config=str(fleet.config))
    client.publish_config()
    try:
        client.trigger("backup")
        client.trigger("backup")
        done = wait_for(lambda: len(history(client.redis, "backup")) == 2 and
                        history(client.redis, "backup"), message="both runs to finish")
        assert [h["status"] for h in done] == ["ok", "ok"]
    finally:
        monitor.hang.set()
    wait_for(lambda: len(monitor.received) == 4, message="the pings, once the monitor answers")
