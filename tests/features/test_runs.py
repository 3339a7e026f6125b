"""What an operator reads of a fire's runs, from a real worker process on a real Redis:
the head and tail of its output stored per fire, its attempts in the order they were
made, history kept per job and listed by whole fires."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
import redis

from cronsvc.cli import render
from cronsvc.cli.render import fire as shown_fire
from cronsvc.keys import Keys
from cronsvc.testing import Fleet, WebServer
from tests.support.browser import shoot
from tests.support.output import numbered, split_at_gap
from tests.support.wait import wait_for

pytestmark = pytest.mark.slow

K = Keys()
NEVER = "0 0 1 1 *"


@pytest.fixture
def fleet(tmp_path: Path, redis_url: str) -> Iterator[Callable[..., Fleet]]:
    made: list[Fleet] = []

    def make(jobs: dict[str, Any], **top: Any) -> Fleet:
        f = Fleet(tmp_path, redis_url, jobs, **top)
        made.append(f)
        return f

    yield make
    for f in made:
        f.stop_all()


def done(f: Fleet, fid: str, state: str = "done") -> Any:
    client = f.client()
    return wait_for(lambda: (v := client.fire(fid)).state == state and v,
                    timeout=40, message=f"{fid} {state}")


def test_output_keeps_its_head_and_tail_per_fire_for_the_retention(
    fleet: Callable[..., Fleet], r: redis.Redis
) -> None:
    f = fleet({"flood": {"cron": NEVER, "shell": True, "output": "4KiB",
                         "command": "echo 'ERROR: disk full' >&2; seq 1 20000"}},
              worker={"output_retention": "1h"})
    f.worker("w1")
    fid = f.trigger("flood")
    view = done(f, fid)
    [attempt] = view.attempts
    out = attempt["output"]
    assert out.startswith("ERROR: disk full\n1\n2\n"), out[:100]
    assert out.endswith("\n19999\n20000\n")
    printed = len("ERROR: disk full\n") + sum(len(f"{i}\n") for i in range(1, 20001))
    head, tail, left_out = split_at_gap(out)
    assert len(head.encode()) + len(tail.encode()) + left_out == printed
    assert numbered(head.removeprefix("ERROR: disk full\n"), tail, 20000)
    # The history record holds an excerpt; the whole is the fire's own key, expiring.
    [line] = r.lrange(K.history("flood"), 0, -1)
    record = json.loads(line)
    assert record["output"].endswith("20000\n") and len(record["output"]) < 500
    assert r.hgetall(K.output(fid)) == {str(record["started"]): out}
    assert 0 < r.pttl(K.output(fid)) <= 3_600_000
    # What it costs is in `cronsvc status`.
    status = f.client().status()
    assert status.runs is not None
    outputs, history = status.runs["outputs"], status.runs["history"]
    assert outputs.keys == 1 and outputs.bytes > 4096
    assert history.keys == 1 and history.bytes > 0
    assert "record of runs: " in render.status(status)


def test_attempts_read_in_order_and_a_retry_by_hand_numbers_on(
    fleet: Callable[..., Fleet], r: redis.Redis
) -> None:
    f = fleet({"flaky": {"cron": NEVER, "shell": True, "retries": 1, "backoff": "1s",
                         "command": "echo try $CRONSVC_ATTEMPT; exit 3"}})
    f.worker("w1")
    fid = f.trigger("flaky")
    done(f, fid, "dead")
    f.client().dead_retry(fid)
    wait_for(lambda: len(f.client().fire(fid).attempts) == 6, timeout=40,
             message="two rounds of attempts")
    view = done(f, fid, "dead")
    seen = [(a["attempt"], a["status"]) for a in view.attempts]
    assert seen == [(1, "failed"), (2, "failed"), (2, "dead"),
                    (3, "failed"), (4, "failed"), (4, "dead")]
    # The dead line names its cause, which comes before it.
    assert view.attempts[2]["reason"] == "no attempts left: exit code 3"
    text = shown_fire(view, f.client().server_ms())
    lines = [ln.strip() for ln in text.splitlines() if ln.startswith("  attempt ")]
    assert [ln.split(" (")[0].split(" on ")[0] for ln in lines] == [
        "attempt 1: failed", "attempt 2: failed", "attempt 2: dead",
        "attempt 3: failed", "attempt 4: failed", "attempt 4: dead"], text


def test_history_is_kept_per_job_and_listed_by_whole_fires(
    fleet: Callable[..., Fleet], r: redis.Redis
) -> None:
    f = fleet({"short": {"cron": NEVER, "command": ["true"], "history": 3},
               "twice": {"cron": NEVER, "command": ["false"], "retries": 1,
                         "backoff": "1s"}})
    f.worker("w1")
    client = f.client()
    client.publish_config()
    shorts = [client.trigger("short") for _ in range(5)]
    wait_for(lambda: all(client.fire(fid).state in ("done", "unknown") for fid in shorts),
             timeout=40, message="five fires run")
    assert r.llen(K.history("short")) == 3
    # A run that prints nothing writes no live output, nor a stored one.
    assert not any(r.exists(K.live(fid), K.output(fid)) for fid in shorts)
    kept = [x["fire"] for x in client.history("short", 10)]
    assert len(set(kept)) == 3 and set(kept) <= set(shorts)
    twice = [client.trigger("twice") for _ in range(3)]
    for fid in twice:
        done(f, fid, "dead")
    listed = client.history("twice", 2)
    # Two fires, each whole: two failed attempts and the dead line.
    assert len({x["fire"] for x in listed}) == 2 and len(listed) == 6


def gated(gate: Path, then: str = "exit 0") -> dict[str, Any]:
    """A command job that prints a line, waits for ``gate`` to exist, prints another."""
    return {"cron": NEVER, "shell": True, "timeout": "2m",
            "command": f"echo 'line 1'; while [ ! -e {gate} ]; do sleep 0.05; done; "
                       f"echo 'line 2'; {then}"}


def following(f: Fleet, fid: str, until: str) -> subprocess.Popen[str]:
    """``cronsvc show FID --follow``, read until it printed the line ``until`` while the
    run is still going: what it printed came live. The rest is the caller's to read."""
    follower = subprocess.Popen(
        [sys.executable, "-m", "cronsvc", "show", fid, "--follow", "--config", str(f.config),
         "--redis-url", f.redis_url], stdout=subprocess.PIPE, env=f.env, text=True)
    assert follower.stdout is not None
    seen = []
    for line in follower.stdout:
        seen.append(line)
        if line == until:
            break
    assert f.client().fire(fid).state == "running", seen
    return follower


def test_show_follow_prints_output_while_the_run_goes_then_its_outcome(
    fleet: Callable[..., Fleet], tmp_path: Path
) -> None:
    gate = tmp_path / "gate"
    f = fleet({"slow": gated(gate), "broken": gated(gate, "exit 3")})
    f.worker("w1")
    fid = f.trigger("slow")
    follower = following(f, fid, "line 1\n")
    gate.touch()
    rest, _ = follower.communicate(timeout=60)
    assert follower.returncode == 0, rest
    assert rest.startswith("line 2\n"), rest
    assert "attempt 1: ok on w1" in rest and "now: done" in rest
    # The live stream outlives the run a minute; the stored output stays.
    assert 0 < f.client().redis.pttl(K.live(fid)) <= 60_000
    # A run that fails: the follower exits 1 with its attempt and reason.
    broken = f.trigger("broken")
    failed = subprocess.run(
        [sys.executable, "-m", "cronsvc", "show", broken, "--follow", "--config",
         str(f.config), "--redis-url", f.redis_url],
        capture_output=True, env=f.env, text=True, timeout=60)
    assert failed.returncode == 1, failed
    assert "attempt 1: failed on w1" in failed.stdout and "(exit code 3)" in failed.stdout


def test_an_async_calls_output_is_followed_live_too(
    fleet: Callable[..., Fleet], tmp_path: Path
) -> None:
    release = tmp_path / "release"
    f = fleet({"chatty": {"cron": NEVER, "call": "tests.support.async_calls:chatty",
                          "kwargs": {"tag": "async", "release": str(release)}}})
    f.worker("w1")
    fid = f.trigger("chatty")
    follower = following(f, fid, "async: printed\n")  # awaiting its release on the loop
    release.touch()
    rest, _ = follower.communicate(timeout=60)
    assert follower.returncode == 0, rest
    assert "async: after the wait\n" in rest and "attempt 1: ok on w1" in rest, rest


def test_the_fire_page_shows_a_runs_output_live_then_its_attempt(
    fleet: Callable[..., Fleet], tmp_path: Path, redis_url: str, browser: Any
) -> None:
    gate = tmp_path / "gate"
    f = fleet({"slow": gated(gate)})
    f.worker("w1")
    with WebServer(tmp_path, redis_url, f.config) as web:
        fid = f.trigger("slow")
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.goto(f"{web.url}/fires/{quote(fid)}")
        live = page.locator("pre.live-output")
        wait_for(lambda: "line 1" in (live.inner_text() if live.count() else ""),
                 timeout=40, message="the live output on the page")
        assert f.client().fire(fid).state == "running"
        shoot(page.locator("main"), tmp_path, "fire-live")
        # The API serves the same pieces, to read on from the last one.
        with web.client() as api:
            got = api.get(f"/api/v1/fires/{quote(fid)}/output").json()
            assert got["state"] == "running" and got["chunks"][0]["attempt"] == 1
            assert "".join(c["text"] for c in got["chunks"]).startswith("line 1\n")
            after = api.get(f"/api/v1/fires/{quote(fid)}/output",
                            params={"after": got["after"]}).json()
            assert after["chunks"] == [] and after["after"] == got["after"]
            assert api.get(f"/api/v1/fires/{quote(fid)}/output",
                           params={"after": "x"}).status_code == 422
        gate.touch()
        first = page.locator("table.history tbody tr").first
        wait_for(lambda: "line 2" in first.inner_text(), timeout=40,
                 message="the page to show the attempt with its output")
        row = first.inner_text()
        lead = page.inner_text(".lead")
    assert "ok" in row and "line 1" in row and "done" in lead
    assert page.locator("pre.live-output").count() == 0
