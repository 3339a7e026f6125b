"""The pytest plugin as a user meets it: a project of its own (a job function and a test
of it, ``tests/testing/project/``) run by pytest with ``-p cronsvc.testing.pytest_plugin``
in a process of its own, outside this repository."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from tests.support.servers import server_binary

PROJECT = Path(__file__).parent / "project"


def run_user_pytest(project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PYTEST_", "CRONSVC_")) and k != "PYTHONPATH"}
    env["CRONSVC_REDIS_SERVER"] = server_binary()
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
         "-p", "cronsvc.testing.pytest_plugin", *args],
        cwd=project, env=env, capture_output=True, text=True, timeout=240)


def test_a_user_project_tests_its_job_on_a_real_fleet(tmp_path: Path) -> None:
    project = shutil.copytree(PROJECT, tmp_path / "project")
    done = run_user_pytest(project)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 passed" in done.stdout, done.stdout


def test_a_job_that_breaks_fails_the_user_test(tmp_path: Path) -> None:
    project = shutil.copytree(PROJECT, tmp_path / "project")
    jobs = project / "myjobs.py"
    jobs.write_text(jobs.read_text().replace("Path(out).write_text", "raise OSError"))
    done = run_user_pytest(project)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "1 failed" in done.stdout and "assert 'dead' == 'ok'" in done.stdout, done.stdout
