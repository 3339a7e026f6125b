"""`cronsvc schedule ...` in-process on a real Redis, and one real process for exit 2."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner, Result

from cronsvc.cli.main import main
from cronsvc.client.client import Client
from tests.support.cli import error_line, ok
from tests.support.paths import CRONSVC

JOBS = {"digest": {"call": "cronsvc.examples:ping"},
        "report": {"cron": "0 6 * * *", "command": ["true"]}}


@pytest.fixture
def cli(redis_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "schedules.yaml"
    path.write_text(yaml.safe_dump({"jobs": JOBS}))
    Client(redis_url, config=str(path)).publish_config()
    env = {"CRONSVC_REDIS_URL": redis_url, "CRONSVC_CONFIG": str(path), "USER": "tester",
           "LOGNAME": "tester"}

    def invoke(*args: str) -> Result:
        return CliRunner().invoke(main, ["schedule", *args], env=env)

    return invoke




def test_add_show_set_pause_resume_rm(cli) -> None:  # type: ignore[no-untyped-def]
    assert ok(cli("add", "digest:user-42", "--job", "digest", "--cron", "0 9 * * *",
                  "--tz", "Europe/Berlin", "--payload", '{"user": 42}')) == (
        "created digest:user-42\n")
    assert error_line(cli("add", "digest:user-42", "--job", "digest", "--cron", "0 9 * * *"),
                      1) == ("schedule 'digest:user-42' exists; `cronsvc schedule set` "
                             "changes it")
    shown = ok(cli("show", "digest:user-42"))
    assert "job:       digest" in shown
    assert "when:      at 09:00 every day (Europe/Berlin)" in shown
    assert 'payload:   {"user": 42}' in shown and "by cli:tester" in shown
    data = json.loads(ok(cli("show", "digest:user-42", "--json")))
    assert (data["cron"], data["payload"], data["rev"]) == ("0 9 * * *", {"user": 42}, 1)
    assert ok(cli("set", "digest:user-42", "--job", "digest", "--cron", "0 9 * * *", "--tz",
                  "Europe/Berlin", "--payload", '{"user": 42}')) == (
        "unchanged digest:user-42\n")
    assert ok(cli("set", "digest:user-42", "--job", "digest", "--every", "90m")) == (
        "changed digest:user-42\n")
    assert ok(cli("pause", "digest:user-42")) == "paused digest:user-42\n"
    assert "paused:    yes" in ok(cli("show", "digest:user-42"))
    assert ok(cli("resume", "digest:user-42")) == "resumed digest:user-42\n"
    assert ok(cli("rm", "digest:user-42")) == "deleted digest:user-42\n"
    assert error_line(cli("rm", "digest:user-42"), 1) == "no schedule 'digest:user-42'"
    assert error_line(cli("show", "digest:user-42"), 1) == "no schedule 'digest:user-42'"


def test_ls_pages_with_a_cursor(cli, redis_url: str) -> None:  # type: ignore[no-untyped-def]
    Client(redis_url).upsert_schedules([{"id": f"u:{i:02d}", "job": "digest", "every": "1h"}
                                        for i in range(30)])
    seen: list[str] = []
    args = ["ls", "--limit", "8", "--json"]
    while True:
        page = json.loads(ok(cli(*args)))
        seen += [s["id"] for s in page["schedules"]]
        if page["cursor"] is None:
            break
        args = ["ls", "--limit", "8", "--json", "--cursor", page["cursor"]]
    assert sorted(seen) == [f"u:{i:02d}" for i in range(30)]
    table = ok(cli("ls", "--prefix", "u:0", "--limit", "1000"))
    assert table.splitlines()[0].split() == ["SCHEDULE", "ID", "JOB", "WHEN", "ZONE", "NEXT",
                                             "FIRE", "CHANGED"]
    assert [line.split()[0] for line in table.splitlines()[1:]] == [f"u:0{i}" for i in range(10)]
    assert ok(cli("ls", "--job", "report")) == "no runtime schedule\n"


@pytest.mark.parametrize(("args", "message"), [
    (["add", "x", "--job", "nope", "--cron", "* * * * *"],
     "schedule 'x': job: unknown job 'nope'"),
    (["add", "x", "--job", "digest", "--cron", "61 * * * *"],
     "schedule 'x': cron: '61 * * * *': minute 61 out of range 0-59"),
    (["add", "x", "--job", "digest", "--cron", "* * * * *", "--tz", "Mars/Base"],
     "schedule 'x': timezone: unknown time zone 'Mars/Base'"),
    (["add", "bad id", "--job", "digest", "--every", "1h"], "schedule id 'bad id': use 1 to"),
    (["add", "x", "--job", "digest", "--every", "1h", "--start", "2030-02-01",
      "--end", "2030-01-01"], "schedule 'x': end: must be after start"),
    (["add", "x", "--job", "digest", "--every", "1h", "--payload", json.dumps("p" * 70_000)],
     "schedule 'x': payload: 70,002 bytes as JSON; at most 65,536"),
    (["ls", "--cursor", "zzz"], "cursor 'zzz': not one this listing gave"),
])
def test_bad_input_is_one_located_line_and_exit_1(  # type: ignore[no-untyped-def]
        cli, args: list[str], message: str) -> None:
    assert message in error_line(cli(*args), 1)


def test_unreachable_redis_is_exit_2(tmp_path: Path) -> None:
    done = subprocess.run([str(CRONSVC), "schedule", "ls", "--redis-url",
                           "redis://127.0.0.1:1/0"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().startswith("cannot reach Redis at redis://127.0.0.1:1/0")
    assert "Traceback" not in done.stderr


def test_status_counts_runtime_schedules(cli, redis_url: str) -> None:  # type: ignore[no-untyped-def]
    Client(redis_url).upsert_schedules([{"id": f"c{i}", "job": "digest", "every": "1h"}
                                        for i in range(3)])
    result = CliRunner().invoke(main, ["status"], env={"CRONSVC_REDIS_URL": redis_url})
    assert "runtime schedules: 3" in result.stdout, (result.stdout, result.stderr)
    data = json.loads(CliRunner().invoke(main, ["status", "--json"],
                                         env={"CRONSVC_REDIS_URL": redis_url}).stdout)
    assert data["schedules"] == 3
