"""The job file: models, located errors, defaults and `cronsvc validate`. Durations
themselves are tested in tests/test_durations.py."""

from __future__ import annotations

import subprocess
from pathlib import Path
from textwrap import dedent

import pytest
from click.testing import CliRunner
from pydantic import ValidationError

from cronsvc.cli.main import main
from cronsvc.config.models import Job, load_config, parse_config
from cronsvc.errors import ConfigError
from cronsvc.kinds import kinds_named
from tests.support.paths import CRONSVC, ROOT


def problems(text: str, source: str = "s.yaml") -> list[str]:
    with pytest.raises(ConfigError) as caught:
        parse_config(dedent(text), source)
    return caught.value.problems


def one_job(**fields: str) -> str:
    """A file with job `j` (cron and command filled in unless given) on lines 2 onwards."""
    body = {"cron": "'* * * * *'", "command": "echo hi", **fields}
    lines = [f"    {key}: {value}" for key, value in body.items() if value != "-"]
    return "jobs:\n  j:\n" + "\n".join(lines) + "\n"


# (file text, the located problem it must report)
BAD = [
    (one_job(cron="'61 * * * *'"),
     "s.yaml:3: jobs.j.cron: '61 * * * *': minute 61 out of range 0-59"),
    (one_job(cron="'* 24 * * *'"), "s.yaml:3: jobs.j.cron: '* 24 * * *': hour 24 out of range"),
    (one_job(cron="'* * *'"), "s.yaml:3: jobs.j.cron: '* * *': expected 5 fields"),
    (one_job(cron="'@sometimes'"), "s.yaml:3: jobs.j.cron: unknown alias '@sometimes'"),
    (one_job(every="90m"), "s.yaml:2: jobs.j: set either cron or every, not both"),
    (one_job(cron="-", every="0.5s"),
     "s.yaml:4: jobs.j.every: '0.5s': an interval of at least 1s, in whole milliseconds"),
    (one_job(cron="-", anchor="2026-01-01T00:00:00Z"),
     "s.yaml:2: jobs.j: anchor only applies to every"),
    (one_job(start="2026-12-02T00:00:00Z", end="2026-12-01T00:00:00Z"),
     "s.yaml:2: jobs.j: end must be after start"),
    (one_job(max_runs="3"), "s.yaml:2: jobs.j: max_runs counts fires from start: set start too"),
    (one_job(cron="-", max_runs="2", start="2026-12-01T00:00:00Z"),
     "s.yaml:2: jobs.j: max_runs needs a schedule (cron or every)"),
    (one_job(cron="-", every="1h", max_runs="0"),
     "s.yaml:5: jobs.j.max_runs: 0: input should be greater than or equal to 1"),
    (one_job(start="tomorrow"), "s.yaml:5: jobs.j.start: 'tomorrow': input should be a valid"),
    (one_job(timezone="Europe/Berln"),
     "s.yaml:5: jobs.j.timezone: unknown time zone 'Europe/Berln'; did you mean 'Europe/Berlin'?"),
    (one_job(timezon="UTC"), "s.yaml:5: jobs.j.timezon: unknown key; did you mean 'timezone'?"),
    (one_job(command="-"),
     "s.yaml:2: jobs.j: set what it runs, one of: command (a program to run), call"),
    (one_job(call="m:f"), "s.yaml:2: jobs.j: set either command or call, not both"),
    (one_job(command="-", call="'pkg.mod'"),
     "s.yaml:4: jobs.j.call: 'pkg.mod': malformed call: expected 'package.module:function'"),
    (one_job(command="-", call="'1pkg:f'"), "s.yaml:4: jobs.j.call: '1pkg:f': malformed call"),
    (one_job(command="'echo \"unterminated'"), "s.yaml:4: jobs.j.command: 'echo \"unterminated'"
     ": cannot split like a shell would: No closing quotation"),
    (one_job(command="''"), "s.yaml:4: jobs.j.command: '': empty command"),
    (one_job(command="[a, b]", shell="true"),
     "s.yaml:4: jobs.j.command: with shell: true, give the command as one string"),
    (one_job(args="[1]"), "s.yaml:2: jobs.j: args and kwargs only apply to call jobs"),
    (one_job(timeout="0"), "s.yaml:5: jobs.j.timeout: 0: must be positive"),
    (one_job(timeout="-5"), "s.yaml:5: jobs.j.timeout: -5: must be positive"),
    (one_job(backoff="-1m"), "s.yaml:5: jobs.j.backoff: '-1m': not a duration"),
    (one_job(starting_deadline="soon"), "s.yaml:5: jobs.j.starting_deadline: 'soon': not a"),
    (one_job(jitter="-1"), "s.yaml:5: jobs.j.jitter: -1: must not be negative"),
    (one_job(retries="-1"), "s.yaml:5: jobs.j.retries: -1: input should be greater than or"),
    (one_job(overlap="sometimes"), "s.yaml:5: jobs.j.overlap: 'sometimes': input should be"),
    (one_job(catch_up="first"), "s.yaml:5: jobs.j.catch_up: 'first': input should be 'all'"),
    (one_job(env="[A]"), "s.yaml:5: jobs.j.env: input should be a valid dictionary"),
    ("jobs:\n  'bad name':\n    cron: '* * * * *'\n    command: x\n",
     "s.yaml:2: jobs.bad name: invalid job name"),
    ("jobs:\n  -x:\n    cron: '* * * * *'\n    command: x\n", "s.yaml:2: jobs.-x: invalid job"),
    ("jobs:\n  a:\n    cron: '* * * * *'\n    command: x\n  a:\n    cron: '@daily'\n",
     "s.yaml:5: jobs.a: duplicate job name (first at line 2)"),
    ("jobs:\n  a: 5\n",
     "s.yaml:2: jobs.a: expected a mapping with what it runs (command, call, "),
    ("jobs: [a]\n", "s.yaml:1: jobs: expected a mapping, got list"),
    ("jobz: {}\n", "s.yaml:1: jobz: unknown key; did you mean 'jobs'?"),
    ("redis: {}\n", "s.yaml: jobs: missing"),
    ("redis:\n  url: x\n  shard: 2\njobs: {}\n",
     "s.yaml:3: redis.shard: unknown key; did you mean 'shards'?"),
    ("redis:\n  cluster: true\njobs: {}\n", "s.yaml:1: redis: cluster: true needs shards: 2"),
    ("worker:\n  lease: 0s\njobs: {}\n", "s.yaml:2: worker.lease: '0s': must be positive"),
    ("planner:\n  horizon: 2x\njobs: {}\n", "s.yaml:2: planner.horizon: '2x': not a duration"),
    ("defaults:\n  cron: '* * * * *'\njobs: {}\n",
     "s.yaml:2: defaults.cron: cannot have a default: set it in each job"),
    ("defaults:\n  retrys: 1\njobs: {}\n",
     "s.yaml:2: defaults.retrys: unknown key; did you mean 'retries'?"),
    ("defaults:\n  timezone: Mars/Base\njobs: {}\n",
     "s.yaml:2: defaults.timezone: unknown time zone 'Mars/Base'"),
    ("", "s.yaml: empty file"),
    ("# only a comment\n", "s.yaml: empty file"),
    ("- a\n- b\n", "s.yaml:1: expected a mapping with keys"),
    ("jobs:\n  a:\n    cron: [\n", "s.yaml:4: YAML syntax error"),
    ("jobs:\n  a:\n    cron: @daily\n", "s.yaml:3: YAML syntax error"),
]


@pytest.mark.parametrize(("text", "expected"), BAD, ids=[expected for _, expected in BAD])
def test_bad_file_reports_located_problem(text: str, expected: str) -> None:
    found = problems(text)
    assert any(expected in line for line in found), found


def test_every_problem_of_a_file_is_reported_at_once() -> None:
    found = problems("""\
        defaults:
          timeout: 0
        jobs:
          backup:
            cron: "61 * * * *"
            command: ["echo", "hi"]
          report:
            cron: "0 9 * * 1-5"
            timezon: Europe/Berlin
            call: "reports:weekly"
          sync:
            cron: "*/5 * * * *"
            timezone: Europe/Berln
            command: sync
          backup:
            cron: "@daily"
            command: date
        """, "schedules.yaml")
    assert found == [
        "schedules.yaml:2: defaults.timeout: 0: must be positive",
        "schedules.yaml:5: jobs.backup.cron: '61 * * * *': minute 61 out of range 0-59",
        "schedules.yaml:9: jobs.report.timezon: unknown key; did you mean 'timezone'?",
        "schedules.yaml:13: jobs.sync.timezone: unknown time zone 'Europe/Berln'; "
        "did you mean 'Europe/Berlin'?",
        "schedules.yaml:15: jobs.backup: duplicate job name (first at line 4)",
    ]


def test_defaults_apply_and_a_job_value_wins() -> None:
    config = parse_config(dedent("""\
        defaults:
          timezone: Europe/Berlin
          timeout: 5m
          retries: 2
          env: {A: "1"}
        jobs:
          plain:
            cron: "0 3 * * *"
            command: "tar -czf '/tmp/my backup.tgz' /etc"
          own:
            cron: "0 3 * * *"
            timezone: UTC
            timeout: 90
            retries: 0
            env: {B: 2}
            call: cronsvc.examples:ping
        """), "f.yaml")
    plain, own = config.jobs["plain"], config.jobs["own"]
    assert (plain.timezone, plain.timeout, plain.retries, plain.env) == (
        "Europe/Berlin", 300.0, 2, {"A": "1"})
    assert (own.timezone, own.timeout, own.retries, own.env) == ("UTC", 90.0, 0, {"B": "2"})
    assert plain.command == ("tar", "-czf", "/tmp/my backup.tgz", "/etc")
    assert (plain.kind, own.kind, plain.max_attempts, own.max_attempts) == ("command", "call", 3, 1)
    assert config.source == "f.yaml" and config.worker.concurrency == 4


def test_defaults_problem_is_reported_once_not_per_job() -> None:
    text = "defaults:\n  overlap: never\njobs:\n" + "".join(
        f"  j{i}:\n    cron: '@daily'\n    command: x\n" for i in range(3))
    assert problems(text) == [
        "s.yaml:2: defaults.overlap: 'never': input should be 'allow', 'forbid', 'replace' "
        "or 'queue'"]


@pytest.mark.parametrize(("fields", "command"), [
    ({"command": "echo 'a b' c"}, ("echo", "a b", "c")),
    ({"command": ["sleep", 5]}, ("sleep", "5")),
    ({"command": "ls | wc -l", "shell": True}, ("ls | wc -l",)),
])
def test_command_forms(fields: dict[str, object], command: tuple[str, ...]) -> None:
    assert Job.model_validate({"name": "j", "cron": "@daily", **fields}).command == command


def test_job_built_directly_is_checked_too() -> None:
    with pytest.raises(ValidationError, match="not both"):
        Job(name="j", cron="@daily", command=("x",), call="m:f")
    with pytest.raises(ValidationError, match="minute 99"):
        Job(name="j", cron="99 * * * *", call="m:f")


def test_derived_properties() -> None:
    job = Job(name="j", cron="0 3 * * *", call="m:f", backoff=10, backoff_max=60, retries=5)
    assert len(job.digest) == 12 and int(job.digest, 16) >= 0
    assert job.digest == Job(name="other", cron="0 3 * * *", command=("x",), timeout=5).digest
    for changed in ({"cron": "0 4 * * *"}, {"timezone": "Asia/Tokyo"}, {"jitter": 1.0}):
        fields = {"name": "j", "cron": "0 3 * * *", "call": "m:f", **changed}
        assert Job.model_validate(fields).digest != job.digest
    assert [job.retry_delay(n) for n in (1, 2, 3, 4, 5)] == [10, 20, 40, 60, 60]
    assert job.max_attempts == 6 and job.kind == "call"
    with pytest.raises(ValidationError):
        job.cron = "@daily"  # type: ignore[misc]


def test_example_file_is_valid_and_shows_the_features() -> None:
    config = load_config(ROOT / "schedules.yaml")
    jobs = config.jobs
    assert 8 <= len(jobs) <= 15
    crons = {job.cron for job in jobs.values()}
    assert any(job.every for job in jobs.values())  # an interval
    assert any(job.cron is None and job.every is None for job in jobs.values())  # on demand
    assert {"*/10 * * * * *", "@hourly", "0 9 * * 1-5"} <= crons
    assert any(" L " in f" {cron} " for cron in crons)
    assert any(job.paused for job in jobs.values())
    assert any(job.calendar for job in jobs.values())  # a holiday calendar
    assert any(job.overlap == "forbid" and job.timezone == "Europe/Berlin" for job in jobs.values())
    assert any(job.kind == "call" for job in jobs.values())
    assert any(job.kind == "http" for job in jobs.values())
    assert config.declared_in_python == ["weekly-report"]  # by cronsvc/examples.py
    assert jobs["weekly-report"].declared_at.startswith("cronsvc/examples.py:")


def test_example_call_target_runs() -> None:
    from cronsvc.examples import ping

    assert "pong" in ping("x")


def test_missing_and_unreadable_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(tmp_path / "schedules.yaml")
    assert caught.value.problems == [f"{tmp_path / 'schedules.yaml'}: no such file"]
    with pytest.raises(ConfigError, match="cannot read"):
        load_config(tmp_path)


def test_yaml_anchors_and_merge_keys_work() -> None:
    config = parse_config(dedent("""\
        jobs:
          a: &base
            cron: "@daily"
            command: date
            tags: [x]
          b:
            <<: *base
            cron: "@hourly"
        """), "s.yaml")
    assert config.jobs["b"].cron == "@hourly" and config.jobs["b"].tags == ("x",)


BROKEN = "jobs:\n  a:\n    cron: '61 * * * *'\n    command: x\n  b:\n    cron: '@daily'\n"


def test_cli_validate_ok(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["validate", str(ROOT / "schedules.yaml")])
    assert result.exit_code == 0, result.output
    # nightly-backup runs at 02:30 in Berlin: the DST nights of the next 12 months say so
    assert result.stdout.strip().endswith(
        "schedules.yaml: 13 jobs (1 declared in Python) OK (2 warnings)")
    assert all("jobs.nightly-backup.cron: on " in line for line in result.stderr.splitlines())


def test_cli_validate_finds_file_through_env(tmp_path: Path) -> None:
    path = tmp_path / "x.yaml"
    path.write_text("jobs:\n  a:\n    cron: '@daily'\n    command: x\n")
    result = CliRunner().invoke(main, ["validate"], env={"CRONSVC_CONFIG": str(path)})
    assert result.exit_code == 0 and "1 job OK" in result.output


def test_cli_validate_lists_every_problem(tmp_path: Path) -> None:
    path = tmp_path / "schedules.yaml"
    path.write_text(BROKEN)
    result = CliRunner().invoke(main, ["validate", "--config", str(path)])
    assert result.exit_code == 1
    assert result.stderr.splitlines() == [
        f"{path}:3: jobs.a.cron: '61 * * * *': minute 61 out of range 0-59",
        f"{path}:5: jobs.b: set what it runs, one of: {kinds_named()}",
    ]
    assert "Traceback" not in result.output


def test_cli_validate_missing_file(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["validate", str(tmp_path / "none.yaml")])
    assert result.exit_code == 1 and result.stderr.strip().endswith("none.yaml: no such file")


def test_installed_command_reports_errors(tmp_path: Path) -> None:
    (tmp_path / "schedules.yaml").write_text(BROKEN)
    done = subprocess.run([str(CRONSVC), "validate"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 1, done
    assert done.stdout == "" and "Traceback" not in done.stderr
    assert done.stderr.splitlines()[0] == (
        "schedules.yaml:3: jobs.a.cron: '61 * * * *': minute 61 out of range 0-59")


def test_a_job_keeps_no_more_output_than_the_fleet_cap() -> None:
    text = """\
        worker:
          output: 128KiB
          output_max: 64KiB
        jobs:
          small:
            cron: "30 * * * *"
            command: ["true"]
            output: 32KiB
          big:
            cron: "30 * * * *"
            command: ["true"]
            output: 1MiB
        """
    assert problems(text) == [
        "s.yaml:2: worker.output: 128.0 KiB is over worker.output_max (64.0 KiB)",
        "s.yaml:12: jobs.big.output: 1.0 MiB is over worker.output_max (64.0 KiB), the most "
        "a job of this file may keep"]
    within = dedent(text.replace("128KiB", "16KiB").replace("1MiB", "64KiB"))
    jobs = parse_config(within + "  plain: {cron: '30 * * * *', command: ['true']}\n",
                        "s.yaml").jobs
    assert {name: job.output for name, job in jobs.items()} == {
        "small": 32 * 1024, "big": 64 * 1024, "plain": 16 * 1024}
