"""The terminal views that show what the pages show: `show FIRE`, history grouped by fire,
`ls` with the job's description in 120 columns (`--wide`: all), `queue --by-job`."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
import redis
import yaml
from click.testing import CliRunner, Result

from cronsvc.cli.main import main
from cronsvc.client.client import Client
from cronsvc.fires import fire_id
from cronsvc.keys import Keys
from cronsvc.store.scripts import Scripts
from tests.support.cli import ok
from tests.support.wait import server_ms

K = Keys()
Invoke = Callable[..., Result]
JOBS = {
    "backup": {"cron": "30 2 * * *", "timezone": "Europe/Berlin", "command": ["backup.sh"],
               "retries": 1, "description": "copies the database to the bucket every night, "
                                            "then checks the copy and prunes old ones"},
    "tick": {"cron": "*/10 * * * * *", "command": ["true"]},
}


@pytest.fixture
def cli(redis_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Invoke:
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "schedules.yaml"
    path.write_text(yaml.safe_dump({"jobs": JOBS}))
    Client(redis_url, config=str(path)).publish_config()
    env = {"CRONSVC_REDIS_URL": redis_url, "CRONSVC_CONFIG": str(path)}
    return lambda *args: CliRunner().invoke(main, list(args), env=env)


def two_attempts(r: redis.Redis, due: int) -> str:
    """A fire of backup that failed once (exit 3, with output) and then ran ok."""
    s = Scripts(r)
    fid = fire_id("backup", due)
    s.enqueue(K, fid, due, None)
    (c,) = s.claim(K, "w1", now_ms=due).claimed
    failed = {"fire": fid, "job": "backup", "status": "failed", "reason": "exit 3",
              "scheduled": due, "started": due + 5, "duration_ms": 1200, "attempt": c.token,
              "worker": "w1", "exit_code": 3, "output": "disk full\nretry later"}
    assert s.fail(K, fid, c.token, "backup", failed, 100, 2, due + 10, now_ms=due + 10).verdict \
        == "retry"
    (c2,) = s.claim(K, "w2", now_ms=due + 20).claimed
    s.ack(K, fid, c2.token, "backup", {"fire": fid, "job": "backup", "status": "ok",
                                        "scheduled": due, "started": due + 25,
                                        "duration_ms": 900, "attempt": c2.token, "worker": "w2",
                                        "exit_code": 0, "output": None})
    return fid


def test_show_lists_every_attempt_of_a_fire(cli: Invoke, r: redis.Redis) -> None:
    fid = two_attempts(r, server_ms(r) - 600_000)
    out = ok(cli("show", fid))
    lines = out.splitlines()
    assert lines[0].startswith(f"{fid}: cron fire of backup, due ")
    assert lines[1] == "now: done"
    assert "attempt 1: failed on w1" in out and "exit 3" in out and "took 1.2s" in out
    assert "    disk full" in out and "attempt 2: ok on w2" in out
    assert out.index("attempt 1") < out.index("attempt 2")
    view = json.loads(ok(cli("show", fid, "--json")))
    assert (view["state"], [a["attempt"] for a in view["attempts"]]) == ("done", [1, 2])
    bad = cli("show", "nonsense")
    assert bad.exit_code == 2 and "not a fire id: 'nonsense'" in bad.stderr
    assert "Traceback" not in bad.stderr


def test_show_says_where_a_fire_waits(cli: Invoke, r: redis.Redis) -> None:
    due = server_ms(r) + 3_600_000
    fid = fire_id("backup", due, "tabc")
    Scripts(r).enqueue(K, fid, due, None)
    out = ok(cli("show", fid))
    assert "now: queued" in out and "no attempt recorded" in out


def test_history_groups_the_attempts_of_a_fire_newest_scheduled_first(
        cli: Invoke, r: redis.Redis) -> None:
    now = server_ms(r)
    older = two_attempts(r, now - 7_200_000)
    newer = two_attempts(r, now - 3_600_000)
    rows = ok(cli("history", "backup")).splitlines()[1:]
    assert rows[0].startswith(newer) and rows[1].startswith("  ↳")
    assert rows[2].startswith(older) and rows[3].startswith("  ↳")
    assert [r_.split()[1] for r_ in rows if r_.startswith("  ↳")] == ["ok", "ok"]


def test_ls_shows_the_description_within_120_columns_and_everything_wide(cli: Invoke) -> None:
    text = ok(cli("ls"))
    assert text.splitlines()[0].split()[-1] == "DESCRIPTION"
    backup = next(line for line in text.splitlines() if line.startswith("backup"))
    assert "copies the database" in backup and backup.endswith("…")
    assert max(len(line) for line in text.splitlines()) <= 120
    wide = ok(cli("ls", "--wide"))
    assert "then checks the copy and prunes old ones" in wide
    assert "30 2 * * *" in wide and "OVERLAP" in wide
    # Where each job is written: in --wide, and in the narrow table only once the file
    # discovers jobs declared in Python (tests/features/test_declared.py).
    assert wide.splitlines()[0].endswith("DECLARED AT") and "DECLARED" not in text
    assert next(line for line in wide.splitlines() if line.startswith("backup")).endswith(
        "schedules.yaml:2")


def test_queue_by_job_sums_up_the_queue(cli: Invoke, r: redis.Redis) -> None:
    s = Scripts(r)
    now = server_ms(r)
    for n in range(3):
        s.enqueue(K, fire_id("backup", now - 60_000 * (n + 1), f"t{n}"), now - 60_000 * (n + 1),
                  None)
    s.enqueue(K, fire_id("tick", now + 60_000, "t9"), now + 60_000, None)
    s.claim(K, "w1", batch=1, now_ms=now)  # the oldest backup fire goes in flight
    out = ok(cli("queue", "--by-job")).splitlines()
    assert out[0].split() == ["JOB", "DUE", "NOW", "AHEAD", "IN", "FLIGHT", "DEAD", "OLDEST",
                              "DUE", "WAITING"]
    backup = out[1].split()
    assert backup[:5] == ["backup", "2", "0", "1", "0"] and backup[5].endswith("m")
    assert out[2].split()[:5] == ["tick", "0", "1", "0", "0"]
    rows = json.loads(ok(cli("queue", "--by-job", "--json")))
    assert [(q["job"], q["due"], q["ahead"], q["in_flight"]) for q in rows] == [
        ("backup", 2, 0, 1), ("tick", 0, 1, 0)]
