"""Jobs declared in Python, collected by a job file's ``discover:`` in a real child process
from modules written to the test's directory: merged as if written in the file, located
at their module:line, and a module that breaks is a broken job file."""

from __future__ import annotations

import os
import threading
from functools import partial
from pathlib import Path
from textwrap import dedent

import pytest
from click.testing import CliRunner

from cronsvc.cli.main import main
from cronsvc.config.discover import collect
from cronsvc.config.jobfile import JobFile
from cronsvc.config.models import load_config, parse_config
from cronsvc.errors import ConfigError
from tests.support.wait import wait_for

REPORTS = """\
import cronsvc


@cronsvc.job("0 9 * * *", timezone="Europe/Berlin", overlap="forbid")
def send_digest(team="core", ctx=None):
    return f"digest for {team}"


@cronsvc.job(every="5m")
async def poll(ctx=None):
    return "polled"
"""


@pytest.fixture
def code(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A directory on the import path (of this process, and so of the collecting child)."""
    where = tmp_path / "code"
    where.mkdir()
    monkeypatch.syspath_prepend(str(where))
    return where


def job_file(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "schedules.yaml"
    path.write_text(dedent(text))
    return path


def problems(path: Path) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    return caught.value.problems


def test_a_file_holds_the_jobs_its_modules_declare_as_if_written_in_it(
        tmp_path: Path, code: Path) -> None:
    (code / "reports.py").write_text(REPORTS)
    path = job_file(tmp_path, """\
        discover: [reports]
        defaults:
          timeout: 10m
        jobs:
          archive:
            command: ["true"]
            on_success: poll
        """)
    config = load_config(path)
    assert list(config.jobs) == ["archive", "send-digest", "poll"]
    digest, poll = config.jobs["send-digest"], config.jobs["poll"]
    assert (digest.call, digest.cron, digest.timezone, digest.overlap, digest.timeout) == (
        "reports:send_digest", "0 9 * * *", "Europe/Berlin", "forbid", 600.0)
    assert (poll.call, poll.every) == ("reports:poll", 300.0)
    assert config.jobs["archive"].on_success == ("poll",)  # a chain into a declared job
    assert [j.declared_at for j in config.jobs.values()] == [
        f"{path}:5", "reports.py:4", "reports.py:9"]
    assert config.declared_in_python == ["send-digest", "poll"]
    assert config.discover == ("reports",) and config.watched == (str(code / "reports.py"),)


def test_a_declared_job_changed_changes_the_digests_and_one_moved_down_does_not(
        tmp_path: Path, code: Path) -> None:
    (code / "reports.py").write_text(REPORTS)
    path = job_file(tmp_path, "discover: reports\n")
    before = load_config(path)
    (code / "reports.py").write_text(REPORTS.replace('overlap="forbid"', 'retries=3'))
    changed = load_config(path)
    assert changed.digest != before.digest
    assert changed.jobs["send-digest"].definition != before.jobs["send-digest"].definition
    assert changed.jobs["poll"] == before.jobs["poll"]
    (code / "reports.py").write_text("\n\n" + REPORTS)
    moved = load_config(path)
    assert moved.digest == before.digest
    assert moved.jobs["poll"].declared_at == "reports.py:11"


def test_a_job_declared_twice_names_both_places(tmp_path: Path, code: Path) -> None:
    (code / "twice.py").write_text(REPORTS + dedent("""\


        @cronsvc.job("@hourly", name="send-digest")
        def again(ctx=None):
            pass
        """))
    path = job_file(tmp_path, """\
        discover: [twice]
        jobs:
          poll:
            every: 1m
            command: ["true"]
        """)
    assert problems(path) == [
        f"twice.py:9: jobs.poll: declared twice: here, and in the job file at {path}:3",
        "twice.py:14: jobs.send-digest: declared twice: here, and in Python at twice.py:4"]


def test_problems_of_declared_jobs_are_located_at_their_module_line(
        tmp_path: Path, code: Path) -> None:
    (code / "wrong.py").write_text(dedent("""\
        import cronsvc


        @cronsvc.job("0 9 * * *", timezone="Mars/Base", retry=2)
        def digest(ctx=None):
            pass


        @cronsvc.job("1 * * * *", notify="ops")
        def report(ctx=None):
            pass
        """))
    path = job_file(tmp_path, """\
        discover: [wrong]
        jobs:
          tick:
            cron: "70 * * * *"
            command: ["true"]
        """)
    result = CliRunner().invoke(main, ["validate", str(path)])
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert result.stderr.splitlines() == [
        f"{path}:4: jobs.tick.cron: '70 * * * *': minute 70 out of range 0-59",
        "wrong.py:4: jobs.digest.timezone: unknown time zone 'Mars/Base'",
        "wrong.py:4: jobs.digest.retry: unknown key; did you mean 'retries'?",
        "wrong.py:9: jobs.report.notify: unknown channel 'ops' (declared under notify: none)"]


@pytest.mark.parametrize(("body", "problem"), [
    ("import cronsvc\n\nraise RuntimeError('no config')\n",
     "broken.py:3: discover[1]: cannot import broken: RuntimeError: no config"),
    ("import sys\n\nsys.exit(3)\n", "broken.py:3: discover[1]: cannot import broken: "
                                    "SystemExit: 3"),
    ("def f(:\n", "broken.py:1: discover[1]: cannot import broken: SyntaxError: invalid "
                  "syntax (broken.py, line 1)"),
    ("import os\n\nos._exit(3)\n", "{path}:3: discover[1]: cannot import broken: importing "
                                   "ended the process (exit code 3)"),
    ("import time\n\ntime.sleep(60)\n", "{path}:3: discover[1]: cannot import broken: "
                                        "importing took longer than 1s"),
])
def test_a_module_that_breaks_is_a_located_problem_of_the_file(
        tmp_path: Path, code: Path, body: str, problem: str) -> None:
    (code / "reports.py").write_text(REPORTS)
    (code / "broken.py").write_text(body)
    path = job_file(tmp_path, """\
        discover:
          - reports
          - broken
        """)
    with pytest.raises(ConfigError) as caught:
        parse_config(path.read_text(), str(path), partial(collect, timeout=1))
    assert caught.value.problems == [problem.format(path=path)]


def test_discover_names_modules(tmp_path: Path) -> None:
    path = job_file(tmp_path, "discover: [proj.jobs, 3, proj-jobs]\n")
    assert problems(path) == [
        f"{path}:1: discover[1]: 3: expected a module's dotted name, such as proj.jobs",
        f"{path}:1: discover[2]: 'proj-jobs': expected a module's dotted name, such as "
        "proj.jobs"]
    path.write_text("discover: {proj: jobs}\n")
    assert problems(path) == [f"{path}:1: discover: expected a list of modules, such as "
                              "[proj.jobs]"]


def test_a_job_stacked_on_a_celery_task_is_a_celery_job(tmp_path: Path, code: Path) -> None:
    (code / "tasks.py").write_text(dedent("""\
        import cronsvc
        from tests.support.celery_app import digest

        cronsvc.job("0 8 * * 1-5", args=["core"], timeout="5m")(digest)
        """))
    job = load_config(job_file(tmp_path, "discover: [tasks]\n")).jobs["digest"]
    assert job.kind == "celery" and job.declared_at == "tasks.py:4"
    assert (job.celery.task, job.celery.app, job.celery.args) == (
        "tests.digest", "tests.support.celery_app:app", ("core",))


def test_a_module_changed_is_a_change_of_the_file_and_a_broken_one_keeps_the_last_good(
        tmp_path: Path, code: Path) -> None:
    module = code / "reports.py"
    module.write_text(REPORTS)
    jobs = JobFile(job_file(tmp_path, "discover: [reports]\n"))
    changed = threading.Event()
    jobs.watch(changed.set, every=0.05)
    try:
        module.write_text(REPORTS.replace("every=\"5m\"", "every=\"10m\""))
        wait_for(changed.is_set, message="the watch to see the module change")
        new = jobs.reload()
        assert new is not None and new.jobs["poll"].every == 600.0
        module.write_text(REPORTS + "\nraise RuntimeError('half a deploy')\n")
        os.utime(module, ns=(1, 1))  # another mtime, whatever the clock's resolution
        assert jobs.reload() is None and jobs.config is new
        assert jobs.broken is not None and jobs.broken.problems == (
            "reports.py:13: discover[0]: cannot import reports: RuntimeError: half a deploy",)
        module.write_text(REPORTS)
        assert jobs.reload() is not None and jobs.broken is None
        assert jobs.config.jobs["poll"].every == 300.0
    finally:
        jobs.stop()


def test_what_the_decorator_could_not_declare_is_located_too(tmp_path: Path, code: Path) -> None:
    (code / "inner.py").write_text(dedent("""\
        import cronsvc


        def make():
            @cronsvc.job("@daily", kwargs={"at": object()})
            def nested(ctx=None):
                pass


        make()
        """))
    assert problems(job_file(tmp_path, "discover: [inner]\n")) == [
        "inner.py:5: jobs.nested.call: inner:make.<locals>.nested is defined inside a "
        "function: a worker cannot import it; declare it at module level",
        "inner.py:5: jobs.nested.kwargs: a value of type object cannot be written in a job "
        "file (strings, numbers, lists, mappings, datetime and timedelta can)"]


def test_jobs_sent_to_rq_arq_and_dramatiq_are_jobs_of_their_kinds(
        tmp_path: Path, code: Path) -> None:
    (code / "queued.py").write_text(dedent("""\
        import cronsvc
        from tests.support.dramatiq_app import digest

        cronsvc.job("0 7 * * *", broker="${DRAMATIQ_BROKER_URL}", args=["core"])(digest)


        @cronsvc.job("30 6 * * *", via="rq", queue="reports")
        def rebuild_index(ctx=None):
            pass


        @cronsvc.job(every="10m", via="arq", redis="${ARQ_REDIS_URL}")
        async def refresh(ctx):
            pass
        """))
    jobs = load_config(job_file(tmp_path, "discover: [queued]\n")).jobs
    assert {name: (job.kind, job.declared_at) for name, job in jobs.items()} == {
        "digest": ("dramatiq", "queued.py:4"), "rebuild-index": ("rq", "queued.py:7"),
        "refresh": ("arq", "queued.py:12")}
    assert (jobs["digest"].dramatiq.actor, jobs["digest"].dramatiq.queue) == ("digest",
                                                                              "default")
    assert (jobs["rebuild-index"].rq.func, jobs["rebuild-index"].rq.redis) == (
        "queued.rebuild_index", "${RQ_REDIS_URL}")
    assert jobs["refresh"].arq.function == "refresh"


def test_an_option_the_job_queue_does_not_take_is_located(tmp_path: Path, code: Path) -> None:
    (code / "queued.py").write_text(dedent("""\
        import cronsvc


        @cronsvc.job("30 6 * * *", via="rq", broker="redis://127.0.0.1:6379/1",
                     options={"retry": 3})
        def rebuild_index(ctx=None):
            pass
        """))
    assert problems(job_file(tmp_path, "discover: [queued]\n")) == [
        "queued.py:4: jobs.rebuild-index.broker: not an option of rq jobs, which take redis, "
        "queue, args, kwargs, options, wait"]
    # Once the decorator's own problems are gone, the job's are checked as the file's.
    (code / "queued.py").write_text((code / "queued.py").read_text().replace(
        'broker="redis://127.0.0.1:6379/1"', 'redis="redis://127.0.0.1:6379/1"'))
    assert problems(job_file(tmp_path, "discover: [queued]\n")) == [
        "queued.py:4: jobs.rebuild-index.rq: options: unknown retry; expected some of "
        "at_front, description, failure_ttl, job_timeout, result_ttl, ttl"]
