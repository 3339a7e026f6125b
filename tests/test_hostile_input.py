"""Input that cannot hurt: alias bombs and oversized job files, one-off times out of
range or in the past, absurd times written straight into Redis, and `validate`'s
warnings and import check (call targets that exit, crash or hang)."""

from __future__ import annotations

import json
import re
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path
from textwrap import dedent

import pytest
import redis
import yaml
from click.testing import CliRunner, Result

from cronsvc.cli.main import main
from cronsvc.client.client import Client
from cronsvc.config.models import MAX_FILE_BYTES, load_config, parse_config
from cronsvc.errors import BadTime, ConfigError, CronsvcError
from cronsvc.keys import Keys
from cronsvc.schedule.when import RANGE_MS, parse_when
from tests.support.paths import CRONSVC

K = Keys()
T0 = 1_900_000_000_000  # 2030-03-17T17:46:40Z
# 281 bytes that a loader expanding aliases blindly turns into 9**7 strings (2.9 GB).
BOMB = dedent("""\
    a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]
    b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]
    c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]
    d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]
    e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]
    f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]
    g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]
    jobs: *g
    """)
ABSURD_MS = 10**15 - 1  # the year 33658: the most digits a fire id takes


def problems(text: str) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        parse_config(text, "s.yaml")
    return caught.value.problems


# -- the YAML loader -----------------------------------------------------------------------
def test_an_alias_bomb_is_refused_at_the_line_of_the_alias_that_expands_it() -> None:
    assert len(BOMB) < 400
    (problem,) = problems(BOMB)
    assert re.fullmatch(r"s\.yaml:5: too many YAML aliases: expanding them builds more than "
                        r"20,\d{3} values \(an alias bomb\?\)", problem), problem


def test_a_wider_bomb_of_a_few_kb_is_refused_too() -> None:
    rows = ["a0: &a0 [" + ",".join(['"lol"'] * 60) + "]"]
    rows += [f"a{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * 60) + "]" for i in range(1, 12)]
    text = "\n".join([*rows, "jobs: *a11"])
    assert len(text) < 4096
    (problem,) = problems(text)
    assert problem.startswith("s.yaml:3: too many YAML aliases")


@pytest.mark.parametrize("text, expected", [
    ("jobs: &a [*a]\n", "s.yaml:1: a YAML alias refers to a block that contains it"),
    ("jobs:\n  x: &a\n    <<: *a\n", "s.yaml:3: a YAML alias refers to a block that contains it"),
    ("jobs: " + "[" * 5000 + "]" * 5000 + "\n", "s.yaml: nested too deeply"),
])
def test_cycles_and_deep_nesting_are_located_errors(text: str, expected: str) -> None:
    assert problems(text) == [expected]


def test_a_shared_defaults_block_in_thousands_of_jobs_still_loads() -> None:
    head = dedent("""\
        defaults: &defaults
          timezone: Europe/Berlin
          retries: 3
          timeout: 5m
          overlap: forbid
          catch_up: none
          env: {A: "1", B: "2", C: "3", D: "4", E: "5", F: "6", G: "7", H: "8", I: "9", J: "0"}
          tags: [a, b, c, d]
        jobs:
        """)
    body = "".join(f"  j{i}:\n    <<: *defaults\n    cron: '@daily'\n    call: m:f\n"
                   for i in range(3000))
    # Each job builds the shared block again: 3000 times as many values as it holds.
    config = parse_config(head + body, "s.yaml")
    assert len(config.jobs) == 3000
    assert config.jobs["j2999"].env["J"] == "0" and config.jobs["j0"].tags == ("a", "b", "c", "d")


def test_items_of_an_alias_are_located_at_the_alias() -> None:
    text = "x: &cmd [1, 2]\njobs:\n  a:\n    cron: '* * * * *'\n    command: *cmd\n    bad: 1\n"
    assert "s.yaml:6: jobs.a.bad: unknown key" in problems(text)


def test_a_job_file_past_the_size_bound_is_not_read(tmp_path: Path) -> None:
    path = tmp_path / "big.yaml"
    path.write_bytes(b"# padding\n" * (MAX_FILE_BYTES // 10 + 1))
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    assert caught.value.problems == [f"{path}: larger than 4 MiB: not read (is it the job file?)"]


def test_the_installed_validate_refuses_the_bomb_in_one_line(tmp_path: Path) -> None:
    (tmp_path / "schedules.yaml").write_text(BOMB)
    done = subprocess.run([str(CRONSVC), "validate"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout) == (1, "")
    (line,) = done.stderr.splitlines()
    assert line.startswith("schedules.yaml:5: too many YAML aliases: "), line


# -- times of one-off runs -----------------------------------------------------------------
@pytest.mark.parametrize("text, message", [
    ("+3000000d", "'+3000000d' is more than 10 years ahead"),
    ("+1e308", "'+1e308' is more than 10 years ahead"),
    ("+3653d", "'+3653d' is more than 10 years ahead"),
    ("2999-01-01T00:00", "'2999-01-01T00:00' is more than 10 years ahead"),
    ("-5m", "'-5m' is in the past"),
    ("-1h30m", "'-1h30m' is in the past"),
    ("-x", "'-x': not a delay"),
])
def test_when_refuses_times_in_the_past_or_more_than_ten_years_ahead(text: str,
                                                                      message: str) -> None:
    with pytest.raises(ValueError) as caught:
        parse_when(text, T0)
    assert str(caught.value).startswith(message)


def test_when_takes_times_up_to_ten_years_ahead() -> None:
    assert parse_when("+3652d", T0) == T0 + 3652 * 86_400_000
    assert parse_when("2040-03-17T00:00Z", T0) < T0 + RANGE_MS


@pytest.fixture
def cli(redis_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> CliRunner:
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "schedules.yaml"
    path.write_text(yaml.safe_dump({"jobs": {
        "backup": {"cron": "30 2 * * *", "command": ["true"]},
        "tick": {"cron": "*/10 * * * * *", "command": ["true"], "catch_up": "none"}}}))
    Client(redis_url, config=str(path)).publish_config()
    monkeypatch.setenv("CRONSVC_REDIS_URL", redis_url)
    monkeypatch.setenv("CRONSVC_CONFIG", str(path))
    return CliRunner()


def run(cli: CliRunner, *args: str) -> Result:
    return cli.invoke(main, list(args))


@pytest.mark.parametrize("args, message", [
    (["at", "+3000000d", "backup"], "'+3000000d' is more than 10 years ahead"),
    (["at", "-5m", "backup"], "'-5m' is in the past"),
    (["at", "-5h", "backup", "--tz", "UTC"], "'-5h' is in the past"),
    (["at", "backup", "-5m"], "'-5m' is not a job name"),
])
def test_at_refuses_far_and_negative_times_as_usage_errors(cli: CliRunner, args: list[str],
                                                           message: str) -> None:
    result = run(cli, *args)
    assert result.exit_code == 2 and message in result.stderr, result.stderr
    assert "No such option" not in result.stderr and "Traceback" not in result.stderr


def test_at_still_takes_options_before_and_after_its_arguments(cli: CliRunner,
                                                              r: redis.Redis) -> None:
    result = run(cli, "at", "--payload", "-5", "+1h", "backup", "--tz", "UTC")
    assert result.exit_code == 0, result.stderr
    assert json.loads(r.hget(K.payloads, result.stdout.strip())) == -5
    assert "Run JOB once at WHEN" in run(cli, "at", "-h").stdout


def test_the_client_refuses_times_out_of_range_with_a_cronsvc_error(redis_url: str,
                                                                    tmp_path: Path) -> None:
    path = tmp_path / "schedules.yaml"
    path.write_text(yaml.safe_dump({"jobs": {"backup": {"cron": "@daily", "command": "true"}}}))
    client = Client(redis_url, config=str(path))
    client.publish_config()
    for when in (timedelta(days=3_000_000), datetime(2999, 1, 1, tzinfo=UTC), ABSURD_MS,
                 -ABSURD_MS):
        with pytest.raises(BadTime, match=r"^backup: due time -?\d+ ms is more than 10 years"):
            client.enqueue("backup", when)
    with pytest.raises(CronsvcError, match="naive datetime"):
        client.enqueue("backup", datetime(2030, 1, 1))
    assert client.enqueue("backup", timedelta(days=3650))


def test_every_view_shows_a_fire_of_an_absurd_time_as_its_number(cli: CliRunner,
                                                                r: redis.Redis) -> None:
    far, dead = f"backup@{ABSURD_MS}", f"tick@{ABSURD_MS}#a2222222"
    r.zadd(K.queue, {far: ABSURD_MS, "tick@1#t3333333": float("inf")})
    r.zadd(K.working, {f"backup@{ABSURD_MS}#t4444444": ABSURD_MS})
    r.zadd(K.dead, {dead: ABSURD_MS})
    r.lpush(K.history("backup"), json.dumps({
        "fire": far, "status": "ok", "scheduled": ABSURD_MS, "started": ABSURD_MS,
        "duration_ms": 1, "attempt": 1}))
    for args in (["queue"], ["ls"], ["history", "backup"], ["dead"], ["dead", "--job", "tick"]):
        result = run(cli, *args)
        assert result.exit_code == 0 and "Traceback" not in result.output, (args, result.output,
                                                                          result.exception)
    assert f"{ABSURD_MS} ms" in run(cli, "queue").stdout
    assert f"{ABSURD_MS} ms" in run(cli, "history", "backup").stdout
    assert f"{ABSURD_MS} ms" in run(cli, "dead").stdout
    assert "ok in " in run(cli, "ls").stdout.split("backup", 1)[1].splitlines()[0]


# -- validate: warnings and the import check -----------------------------------------------
def test_validate_warns_of_a_schedule_that_never_fires_and_of_risky_calls(tmp_path: Path
                                                                          ) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(dedent("""\
        jobs:
          feb31:
            cron: "* * 31 2 *"
            command: "true"
          leap:
            cron: "0 0 29 2 *"
            command: "true"
          shell:
            cron: "@daily"
            call: "os:system"
            args: ["rm -rf /tmp/x"]
          spawn:
            cron: "@daily"
            call: "subprocess:run"
        """))
    result = CliRunner().invoke(main, ["validate", str(path)])
    assert result.exit_code == 0, result.stderr
    assert result.stdout == f"{path}: 4 jobs OK (3 warnings)\n"
    assert result.stderr.splitlines() == [
        f"{path}:3: warning: jobs.feb31.cron: '* * 31 2 *' never fires (no fire in the next "
        "9 years)",
        f"{path}:10: warning: jobs.shell.call: 'os:system' can run any program or code (no "
        "shell: true needed): call a function of your own instead",
        f"{path}:14: warning: jobs.spawn.call: 'subprocess:run' can run any program or code "
        "(no shell: true needed): call a function of your own instead",
    ]


MODULES = {
    "fine.py": "print('imported')\nvalue = 5\n\ndef run():\n    pass\n",
    "exits.py": "import sys\nsys.exit(3)\n",
    "crashes.py": "import ctypes\nctypes.string_at(0)\n",
    "hangs.py": "import threading\nthreading.Event().wait()\n",
    "raises.py": "raise RuntimeError('no config')\n",
}


def test_validate_imports_every_call_target_in_a_child_that_may_die(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name, text in MODULES.items():
        (tmp_path / name).write_text(text)
    monkeypatch.chdir(tmp_path)  # the child imports from here, as `python -m cronsvc` would
    calls = ["fine:run", "fine:value", "fine:nope", "nowhere:run", "exits:run", "crashes:run",
             "hangs:run", "raises:run", "fine:run"]
    jobs = {f"j{i}": {"cron": "@daily", "call": call} for i, call in enumerate(calls)}
    (tmp_path / "s.yaml").write_text(yaml.safe_dump({"jobs": jobs}, sort_keys=False))
    result = CliRunner().invoke(main, ["validate", "s.yaml", "--imports",
                                       "--import-timeout", "0.5"])
    assert result.exit_code == 1 and result.stdout == "" and "Traceback" not in result.stderr
    assert result.stderr.splitlines() == [
        "s.yaml:7: jobs.j1.call: fine:value is not callable (type int)",
        "s.yaml:10: jobs.j2.call: cannot import fine:nope: AttributeError: module 'fine' has "
        "no attribute 'nope'",
        "s.yaml:13: jobs.j3.call: cannot import nowhere:run: ModuleNotFoundError: No module "
        "named 'nowhere'",
        "s.yaml:16: jobs.j4.call: cannot import exits:run: SystemExit: 3",
        "s.yaml:19: jobs.j5.call: cannot import crashes:run: importing killed the process "
        "(Segmentation fault)",
        "s.yaml:22: jobs.j6.call: cannot import hangs:run: importing took longer than 0.5s",
        "s.yaml:25: jobs.j7.call: cannot import raises:run: RuntimeError: no config",
    ]
    (tmp_path / "s.yaml").write_text(yaml.safe_dump({"jobs": {"j0": jobs["j0"]}}))
    ok = CliRunner().invoke(main, ["validate", "s.yaml", "--imports"])
    assert (ok.exit_code, ok.stdout) == (0, "s.yaml: 1 job OK, every target imports\n")


def test_an_impossible_date_in_yaml_is_a_located_error_not_a_crash(tmp_path: Path) -> None:
    path = tmp_path / "schedules.yaml"
    path.write_text("jobs:\n  a:\n    cron: '@daily'\n    command: [x]\n    start: 2026-13-01\n")
    result = CliRunner().invoke(main, ["validate", str(path)])
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert result.stderr.startswith(f"{path}:5: jobs.a.start: ")
