"""``cronsvc validate --imports`` says which call targets are async: an ``async def``
function or a partial of one, not a sync function that returns a coroutine."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from cronsvc.cli.main import main
from cronsvc.config.check import check

TASKS = '''
import functools

async def fetch(ctx=None):
    return 1

async def _double(x):
    return 2 * x

def sync(ctx=None):
    return _double(1)

doubled = functools.partial(_double, 21)
'''


@pytest.fixture
def job_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "tasks.py").write_text(TASKS)
    monkeypatch.chdir(tmp_path)  # the child imports from here, as `python -m cronsvc` would
    calls = {"fetch": "tasks:fetch", "sync": "tasks:sync", "doubled": "tasks:doubled"}
    jobs = {name: {"every": "1h", "call": call} for name, call in calls.items()}
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump({"jobs": jobs}, sort_keys=False))
    return path


def test_the_async_jobs_are_named(job_file: Path) -> None:
    assert check(str(job_file), 0, imports=True).async_jobs == ["doubled", "fetch"]
    assert check(str(job_file), 0).async_jobs is None  # not imported: not known


def test_validate_says_how_many_jobs_are_async(job_file: Path) -> None:
    out = CliRunner().invoke(main, ["validate", "s.yaml", "--imports"])
    assert (out.exit_code, out.stdout) == (
        0, "s.yaml: 3 jobs OK, every target imports (2 async: doubled, fetch)\n")
    out = CliRunner().invoke(main, ["validate", "s.yaml", "--imports", "--json"])
    assert json.loads(out.stdout)["async"] == ["doubled", "fetch"]
