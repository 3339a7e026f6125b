"""Jobs declared in Python (``@cronsvc.job``) in a module of the test's directory, found by
real planner and worker processes through the job file's ``discover:``: they run and are
recorded, a rolling deploy of the module keeps a changed job on the workers of the new
code, and a module broken on reload leaves the last good config in force, said so."""

from __future__ import annotations

import collections
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from cronsvc.client.client import Client
from cronsvc.testing import Fleet, history, read_ledger
from tests.support.wait import wait_for

pytestmark = pytest.mark.slow

MODULE = "declared_jobs"

# Every job notes its start and the tag of its code; the first job's decorator is on line 11.
CODE = """\
import cronsvc
from cronsvc.testing.ledger import note

LEDGER = {ledger!r}


def run(path, tag, ctx=None):
    note(path, "start", ctx, tag=tag)
"""
JOB = """

@cronsvc.job(every="1s", catch_up="all", kwargs={{"path": LEDGER, "tag": {tag!r}}})
def {name}(path, tag, ctx=None):
    run(path, tag, ctx)
"""


def module(ledger: str, **tags: str) -> str:
    """The module's text: a job a second for each ``name=tag``."""
    return CODE.format(ledger=ledger) + "".join(JOB.format(name=n, tag=t)
                                                for n, t in tags.items())


def write(code: Path, text: str) -> None:
    """Replace the module at once: a reloading process never reads half of it."""
    tmp = code / f"{MODULE}.tmp"
    tmp.write_text(text)
    os.replace(tmp, code / f"{MODULE}.py")


def starts(path: str, job: str | None = None) -> list[dict[str, Any]]:
    return [e for e in read_ledger(path)
            if e["event"] == "start" and (job is None or e["job"] == job)]


@pytest.fixture
def fleets(tmp_path: Path, redis_url: str) -> Iterator[Any]:
    """``make(name, text)``: a fleet in ``tmp/name`` whose job file discovers the module
    ``text``, written to ``tmp/name/code`` (on its processes' import path)."""
    made: list[Fleet] = []

    def make(name: str, text: str) -> Fleet:
        code = tmp_path / name / "code"
        code.mkdir(parents=True)
        write(code, text)
        f = Fleet(tmp_path / name, redis_url, {}, pythonpath=[code], discover=[MODULE])
        made.append(f)
        return f

    yield make
    for f in made:
        f.stop_all()


def test_a_declared_job_runs_is_recorded_and_ls_shows_where_it_is_declared(
        tmp_path: Path, fleets: Any, r: redis.Redis) -> None:
    ledger = str(tmp_path / "ledger.jsonl")
    f: Fleet = fleets("one", module(ledger, tick="v1"))
    with f.running("worker-a"):
        wait_for(lambda: [h for h in history(r, "tick") if h["status"] == "ok"],
                 message="a run of the declared job recorded ok")
        ls = subprocess.run(
            [sys.executable, "-m", "cronsvc", "ls", "--config", str(f.config), "--redis-url",
             f.redis_url], env=f.env, cwd=f.tmp, capture_output=True, text=True, check=True)
    assert {(e["job"], e["tag"], e["worker"]) for e in starts(ledger)} == {
        ("tick", "v1", "worker-a")}
    header, row = ls.stdout.splitlines()[:2]
    assert header.split()[-2:] == ["DECLARED", "AT"], ls.stdout
    assert row.startswith("tick ") and row.endswith(f" {MODULE}.py:11"), ls.stdout


def test_a_rolling_deploy_of_the_module_runs_a_changed_job_only_on_the_new_code(
        tmp_path: Path, fleets: Any, r: redis.Redis, redis_url: str) -> None:
    ledger = str(tmp_path / "ledger.jsonl")
    new = fleets("new", module(ledger, same="both", changed="new"))
    old = fleets("old", module(ledger, same="both", changed="old"))
    new.planner()
    old.worker("worker-old")
    wait_for(lambda: len(starts(ledger, "same")) >= 3, message="the old worker to run `same`")
    status = wait_for(lambda: (s := Client(redis_url).status()).workers and s,
                      message="the old worker's presence")
    assert status.worker_gaps == {"worker-old": ["another definition of changed"]}
    assert status.unrunnable == ["changed"]
    assert not starts(ledger, "changed") and history(r, "changed") == []

    new_from = Client(redis_url).server_ms()
    new.worker("worker-new")
    wait_for(lambda: [e for e in starts(ledger, "changed") if e["scheduled_ms"] > new_from],
             message="the new worker to run `changed`")
    new.stop_all()
    old.stop_all()

    runs = starts(ledger)
    assert [f for f, n in collections.Counter(e["fire"] for e in runs).items() if n > 1] == []
    changed = starts(ledger, "changed")
    assert {(e["worker"], e["tag"], e["attempt"]) for e in changed} == {("worker-new", "new", 1)}
    # The fires that waited for a worker of the new code ran once it came.
    assert min(e["scheduled_ms"] for e in changed) < new_from
    assert {e["tag"] for e in starts(ledger, "same")} == {"both"}


def test_a_module_broken_on_reload_keeps_the_last_good_config_and_says_where(
        tmp_path: Path, fleets: Any, redis_url: str) -> None:
    ledger = str(tmp_path / "ledger.jsonl")
    f: Fleet = fleets("reload", module(ledger, tick="v1"))
    code = f.tmp / "code"
    with f.running("worker-a"):
        wait_for(lambda: starts(ledger, "tick"), message="the declared job to run")
        write(code, module(ledger, tick="v1") + "\nraise RuntimeError('half a deploy')\n")
        place = f"{MODULE}.py:15: discover[0]: cannot import {MODULE}: RuntimeError: " \
                "half a deploy"
        said = "is invalid; keeping the last good config (1 jobs)"
        for name in ("planner", "worker-a"):
            wait_for(lambda name=name: said in f.log(name) and place in f.log(name),  # type: ignore[misc]
                     timeout=15, message=f"the {name} to report the broken module")

        def rejected() -> list[str]:
            return sorted(w.split("'s job file")[0] for w in Client(redis_url).status().warnings
                          if "is rejected since" in w and place in w)

        wait_for(lambda: rejected() == ["planner", "worker-a"],
                 message="status to show the planner's and the worker's file rejected")
        broken_at = Client(redis_url).server_ms()
        wait_for(lambda: [e for e in starts(ledger, "tick") if e["scheduled_ms"] > broken_at],
                 message="the job to run on the last good config")

        write(code, module(ledger, tick="v2"))  # fixed, and the job changed
        wait_for(lambda: starts(ledger, "tick")[-1]["tag"] == "v2", timeout=30,
                 message="the fixed module's job to run")
        assert "reads again" in f.log("planner") and "reads again" in f.log("worker-a")
