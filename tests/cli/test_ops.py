"""The operator commands with click's CliRunner on a real Redis, their exit codes and
one-line errors; and the installed `cronsvc` binary against a running `cronsvc up`.
The describer, the WHEN parser and the spans they print are tested in
tests/schedule/test_words.py, tests/schedule/test_when.py and tests/cli/test_render.py."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import pytest
import redis
import yaml
from click.testing import CliRunner, Result

from cronsvc.cli.main import main
from cronsvc.client.client import Client
from cronsvc.clock import dt_to_ms
from cronsvc.fires import fire_id, parse_fire
from cronsvc.keys import Keys
from cronsvc.process.redis_server import free_port
from cronsvc.store.scripts import Scripts
from cronsvc.testing import read_ledger
from tests.support.cli import error_line, ok
from tests.support.paths import CRONSVC, ROOT
from tests.support.wait import wait_for

K = Keys()
JOBS = {
    "backup": {"cron": "30 2 * * *", "timezone": "Europe/Berlin", "command": ["true"]},
    "tick": {"cron": "*/10 * * * * *", "command": ["true"], "catch_up": "all"},
}
Invoke = Callable[..., Result]


@pytest.fixture
def cli(redis_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Invoke:
    """Run `cronsvc ARGS` in-process on the test Redis, with JOBS published."""
    monkeypatch.chdir(tmp_path)  # no ./.cronsvc of a real `cronsvc up` is picked up
    path = tmp_path / "schedules.yaml"
    path.write_text(yaml.safe_dump({"jobs": JOBS}))
    Client(redis_url, config=str(path)).publish_config()
    env = {"CRONSVC_REDIS_URL": redis_url, "CRONSVC_CONFIG": str(path)}

    def invoke(*args: str, **more_env: str | None) -> Result:
        return CliRunner().invoke(main, list(args), env={**env, **more_env})

    return invoke




def test_ls_shows_each_published_job_in_a_row_and_as_json(cli: Invoke) -> None:
    rows = ok(cli("ls")).splitlines()
    assert rows[0].split() == ["JOB", "SCHEDULE", "ZONE", "NEXT", "FIRE", "CATCH", "UP",
                               "LAST", "RUN", "PAUSED", "DESCRIPTION"]
    backup = next(r for r in rows if r.startswith("backup"))
    assert "at 02:30 every day" in backup and "Europe/Berlin" in backup
    assert " in " in backup and " latest " in backup
    jobs = json.loads(ok(cli("ls", "--json")))
    assert [(j["name"], j["description"], j["paused"]) for j in jobs] == [
        ("backup", "at 02:30 every day", False), ("tick", "every 10 seconds", False)]


def test_ls_shows_the_starting_deadline_catch_up_none_implies_within_120_columns(
        cli: Invoke, tmp_path: Path, redis_url: str) -> None:
    path = tmp_path / "more.yaml"
    path.write_text(yaml.safe_dump({"jobs": {
        "heartbeat": {"cron": "*/10 * * * * *", "command": ["true"], "catch_up": "none"},
        "nightly-backup": {
            "cron": "0 17 * * 5L", "timezone": "America/New_York",
            "command": ["true"], "catch_up": "latest", "starting_deadline": "2h"},
        "feb31": {"cron": "* * 31 2 *", "command": ["true"], "catch_up": "all"}}}))
    Client(redis_url, config=str(path)).publish_config()
    ok(cli("pause", "nightly-backup", "--note", "db migration until 14:00 "
           "on friday, ask the data team before resuming"))
    text = ok(cli("ls"))
    rows = {line.split()[0]: line for line in text.splitlines()}
    assert " none (1m) " in rows["heartbeat"]
    assert " latest (2h) " in rows["nightly-backup"]
    assert " never " in rows["feb31"] and " all " in rows["feb31"]
    assert "…" in rows["nightly-backup"]  # the long note is cut
    assert max(len(line) for line in text.splitlines()) <= 120, text
    heartbeat = next(j for j in json.loads(ok(cli("ls", "--json"))) if j["name"] == "heartbeat")
    assert (heartbeat["catch_up"], heartbeat["starting_deadline_ms"]) == ("none", 60_000)


def test_ls_works_without_a_job_file_and_lists_what_redis_has(cli: Invoke,
                                                              tmp_path: Path) -> None:
    jobs = json.loads(ok(cli("ls", "--json", CRONSVC_CONFIG=str(tmp_path / "none.yaml"))))
    assert [j["name"] for j in jobs] == ["backup", "tick"]


def test_a_job_file_that_is_not_yaml_is_one_warning_and_the_defaults(cli: Invoke,
                                                                      tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("jobs: [\n")
    result = cli("ls", "--config", str(bad))
    assert result.exit_code == 0 and "backup" in result.stdout, result.stderr
    assert result.stderr == (f"warning: {bad}:2: YAML syntax error: expected the node content, "
                             "but found '<stream end>'; its redis: section does not read "
                             "either: going on with 1 shard, no key prefix\n")


def test_a_broken_job_file_still_gives_its_redis_section_to_operators(
        redis_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "schedules.yaml"
    good = {"redis": {"url": redis_url, "prefix": "app:", "shards": 2},
            "jobs": {"backup": {"cron": "30 2 * * *", "command": ["true"]},
                     "report": {"cron": "0 9 * * *", "command": ["true"]}}}
    path.write_text(yaml.safe_dump(good))
    Client(config=str(path)).publish_config()
    # A typo in one job (and an unknown key) while an operator must act on another one.
    good["jobs"]["report"]["cron"] = "0 25 * * *"
    good["jobs"]["report"]["timezon"] = "UTC"
    path.write_text(yaml.safe_dump(good))
    env = {"CRONSVC_REDIS_URL": None, "CRONSVC_CONFIG": None}
    for args in (["ls"], ["pause", "backup"], ["status"], ["dead"], ["queue"],
                 ["history", "backup"], ["resume", "backup"]):
        result = CliRunner().invoke(main, args, env=env)
        assert result.exit_code == 0, (args, result.stdout, result.stderr)
        (warning,) = [line for line in result.stderr.splitlines() if line.startswith("warning")]
        assert warning == (
            "warning: schedules.yaml:9: jobs.report.cron: '0 25 * * *': hour 25 out of range "
            "0-23 (and 1 more: see `cronsvc validate`); going on with its redis: section")
    listed = json.loads(CliRunner().invoke(main, ["ls", "--json"], env=env).stdout)
    assert [j["name"] for j in listed] == ["backup", "report"]  # found under app:, 2 shards


def test_pause_with_note_shows_in_ls_and_resume_ends_it(cli: Invoke) -> None:
    assert ok(cli("pause", "tick", "--note", "db migration")).startswith("paused tick since ")
    (tick,) = [j for j in json.loads(ok(cli("ls", "--json"))) if j["name"] == "tick"]
    assert (tick["paused"], tick["pause_note"]) == (True, "db migration")
    assert "yes: since" in ok(cli("ls")) and "db migration" in ok(cli("ls"))
    assert ok(cli("resume", "tick")) == "resumed tick\n"
    assert ok(cli("resume", "tick")) == "tick was not paused\n"


def test_pause_of_an_unknown_job_is_exit_1_naming_close_ones(cli: Invoke) -> None:
    assert error_line(cli("pause", "tik"), 1) == "unknown job 'tik'; did you mean tick?"
    assert cli("pause", "no way").exit_code == 2  # not a job name at all: usage


def test_resume_catch_up_lists_the_fires_queued_again(cli: Invoke, r: redis.Redis) -> None:
    ok(cli("pause", "tick"))
    since = json.loads(r.hget(K.paused, "tick"))["since"] - 35_000
    r.hset(K.paused, "tick", json.dumps({"note": "", "since": since}))
    lines = ok(cli("resume", "tick", "--catch-up")).splitlines()
    assert lines[0] == "resumed tick"
    assert lines[1].startswith("catch_up all: ") and len(lines) >= 5
    for fid in (line.strip() for line in lines[2:]):
        assert parse_fire(fid)[1] > since and r.zscore(K.queue, fid) == parse_fire(fid)[1]


def test_trigger_and_at_print_fire_ids_that_queue_shows(cli: Invoke, r: redis.Redis) -> None:
    trig = ok(cli("trigger", "tick", "--payload", '{"n": 1}')).strip()
    assert parse_fire(trig)[2].startswith("t")  # type: ignore[union-attr]
    later = ok(cli("at", "+10m", "backup")).strip()
    year = datetime.now(UTC).year + 2  # `at` takes times at most 10 years ahead
    berlin = ok(cli("at", f"{year}-01-31T09:00", "backup", "--tz", "Europe/Berlin")).strip()
    assert parse_fire(berlin)[1] == dt_to_ms(datetime(year, 1, 31, 8, tzinfo=UTC))  # CET
    view = json.loads(ok(cli("queue", "--json")))
    assert [q["fire"] for q in view["due"]] == [trig]
    assert [q["fire"] for q in view["ahead"]][:2] == [later, berlin]
    assert json.loads(r.hget(K.payloads, trig)) == {"n": 1}
    text = ok(cli("queue"))
    assert text.startswith("due now: 1, oldest waiting ") and trig in text
    assert "planned ahead: 2" in text and "in flight: 0" in text


@pytest.mark.parametrize("args, message", [
    (["at", f"{datetime.now(UTC).year - 1}-01-01T00:00", "backup"], "is in the past"),
    (["at", "soon", "backup"], "not an ISO 8601 time"),
    (["at", "+10x", "backup"], "not a delay"),
    (["trigger", "tick", "--payload", "{nope"], "is not JSON"),
    (["cancel", "tick-without-at"], "not a fire id"),
    (["history", "tick", "-n", "0"], "-n"),
])
def test_usage_errors_are_exit_2(cli: Invoke, args: list[str], message: str) -> None:
    result = cli(*args)
    assert result.exit_code == 2 and message in result.stderr, result.stderr


def test_a_payload_past_the_cap_is_one_line_naming_it(cli: Invoke, r: redis.Redis) -> None:
    big = json.dumps("x" * 70_000)  # below the 128 KiB an argument may have
    for args in (["trigger", "tick"], ["at", "+1h", "backup"]):
        assert error_line(cli(*args, "--payload", big), 1) == (
            f"{args[-1]}: payload: 70,002 bytes as JSON; at most 65,536")
    assert r.zcard(K.queue) == 0


def test_cancel_a_queued_fire_then_it_is_not_queued(cli: Invoke, r: redis.Redis) -> None:
    fid = ok(cli("at", "+1h", "backup")).strip()
    assert ok(cli("cancel", fid)) == f"cancelled {fid}\n"
    assert error_line(cli("cancel", fid), 1) == f"cannot cancel {fid}: not queued: no such fire"
    running = fire_id("tick", 1000)
    r.zadd(K.working, {running: 1})
    assert error_line(cli("cancel", running), 1).endswith("not queued: it is running")


def test_at_an_unknown_job_is_exit_1(cli: Invoke) -> None:
    assert "did you mean backup" in error_line(cli("at", "+1m", "backpu"), 1)


def test_history_table_and_json(cli: Invoke, r: redis.Redis) -> None:
    Scripts(r).record(K, "tick", {"fire": "tick@1000", "job": "tick", "status": "failed",
                                  "reason": "exit 3", "scheduled": 1000, "started": 1012,
                                  "duration_ms": 2500, "attempt": 1, "worker": "w1"})
    assert [h["fire"] for h in json.loads(ok(cli("history", "tick", "--json")))] == ["tick@1000"]
    rows = ok(cli("history", "tick", "-n", "5")).splitlines()
    assert rows[0].split()[:3] == ["FIRE", "STATUS", "SCHEDULED"]
    assert rows[1].split()[:2] == ["tick@1000", "failed"]
    assert "+12ms" in rows[1] and "2.5s" in rows[1] and "w1" in rows[1]
    assert "did you mean tick" in error_line(cli("history", "tock"), 1)


def test_dead_list_retry_and_purge(cli: Invoke, r: redis.Redis) -> None:
    fid = fire_id("tick", 1000, "aqqqqqq")
    r.zadd(K.dead, {fid: 2000})
    r.hset(K.attempts, fid, 3)
    assert [d["fire"] for d in json.loads(ok(cli("dead", "--json")))] == [fid]
    assert fid in ok(cli("dead")) and ok(cli("dead", "--job", "backup")) == "no dead fires\n"
    assert ok(cli("dead", "retry", fid)) == f"queued {fid} again\n"
    assert r.zscore(K.queue, fid) is not None and r.hget(K.attempts, fid) == "0"
    assert error_line(cli("dead", "retry", fid), 1) == f"fire {fid} is not dead (it is queued)"
    r.zadd(K.dead, {fire_id("tick", 3000): 4000, fire_id("backup", 3000): 4000})
    assert ok(cli("dead", "purge", "--job", "tick")) == "purged 1 dead fire\n"
    assert ok(cli("dead", "purge")) == "purged 1 dead fire\n"
    assert ok(cli("dead")) == "no dead fires\n"


def test_status_lists_workers_and_warns_loudly_about_eviction(cli: Invoke,
                                                              r: redis.Redis) -> None:
    r.zadd(K.workers, {"host:1": int(r.time()[0]) * 1000})
    r.hset(K.worker_info, "host:1", json.dumps({"busy": 0, "slots": 4, "pid": 1}))
    result = cli("status")
    assert ok(result).startswith("redis ") and "AOF " in result.stdout
    assert "host:1" in result.stdout and "0/4" in result.stdout
    assert "WARNING: no live planner" in result.stderr and "maxmemory" not in result.stderr
    old = r.config_get("maxmemory-policy")["maxmemory-policy"]
    r.config_set("maxmemory-policy", "volatile-lru")
    try:
        result = cli("status", "--json")
        assert json.loads(ok(result))["maxmemory_policy"] == "volatile-lru"
        assert "WARNING: maxmemory-policy is volatile-lru" in result.stderr
    finally:
        r.config_set("maxmemory-policy", old)


def test_an_unreachable_redis_is_one_line_and_exit_2(cli: Invoke) -> None:
    url = f"redis://127.0.0.1:{free_port()}/0"
    for args in (["ls"], ["pause", "tick"], ["dead", "purge"], ["status"]):
        line = error_line(cli(*args, "--redis-url", url) if args[0] != "dead" else
                          cli("dead", "--redis-url", url, "purge"), 2)
        assert line.startswith(f"cannot reach Redis at {url}: "), line


def test_no_redis_url_anywhere_is_exit_2(cli: Invoke, tmp_path: Path) -> None:
    line = error_line(cli("ls", CRONSVC_REDIS_URL=None, CRONSVC_CONFIG=str(tmp_path / "x")), 2)
    assert line.startswith("no Redis URL: pass --redis-url")


# -- the installed binary ----------------------------------------------------------------
def binary(*args: str, cwd: Path, check: bool = True) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("CRONSVC_REDIS_URL", "CRONSVC_CONFIG")}
    done = subprocess.run([str(CRONSVC), *args], cwd=cwd,
                          env=env, capture_output=True, text=True, timeout=60)
    if check:
        assert done.returncode == 0, (args, done.stdout, done.stderr)
    return done


@pytest.mark.slow
def test_the_installed_binary_operates_a_running_up(tmp_path: Path) -> None:
    ledger = tmp_path / "ledger.jsonl"
    record = {"call": "cronsvc.testing.ledger:record", "kwargs": {"path": str(ledger)}}
    (tmp_path / "schedules.yaml").write_text(yaml.safe_dump({"jobs": {
        "report": {"cron": "0 0 1 1 *", **record}, "other": {"cron": "0 0 1 1 *", **record}}}))
    env = {k: v for k, v in os.environ.items() if k not in ("CRONSVC_REDIS_URL", "CRONSVC_CONFIG")}
    env["PYTHONPATH"] = str(ROOT)
    log = tmp_path / "up.log"
    with open(log, "wb") as out:
        up = subprocess.Popen([str(CRONSVC), "up", "--workers",
                               "1"], cwd=tmp_path, env=env, stdout=out, stderr=out)
    try:
        # `cronsvc up` writes the embedded server's URL to ./.cronsvc: the commands find it.
        wait_for(lambda: (tmp_path / ".cronsvc" / "redis.url").exists() and len(json.loads(
            binary("ls", "--json", cwd=tmp_path, check=False).stdout or "[]")) == 2,
            timeout=40, message="the jobs published by `cronsvc up`")
        fid = binary("trigger", "report", "--payload", '{"to": "ops"}', cwd=tmp_path
                     ).stdout.strip()
        runs = wait_for(lambda: [e for e in read_ledger(ledger) if e["fire"] == fid],
                        message="the triggered run")
        assert runs[0]["payload"] == {"to": "ops"}
        wait_for(lambda: [h for h in json.loads(binary("history", "report", "--json",
                                                       cwd=tmp_path).stdout)
                          if h["fire"] == fid and h["status"] == "ok"], message="its history")
        assert "paused report" in binary("pause", "report", "--note", "x", cwd=tmp_path).stdout
        missing = binary("pause", "reprot", cwd=tmp_path, check=False)
        assert (missing.returncode, missing.stderr) == (
            1, "unknown job 'reprot'; did you mean report?\n")
        later = binary("at", "+1h", "other", cwd=tmp_path).stdout.strip()
        assert later in binary("queue", cwd=tmp_path).stdout
        assert binary("cancel", later, cwd=tmp_path).stdout == f"cancelled {later}\n"
        status = binary("status", cwd=tmp_path)
        assert "planners: 1 live" in status.stdout and "workers: 1 live" in status.stdout
    finally:
        up.send_signal(signal.SIGINT)
        try:
            up.wait(60)
        finally:
            if up.poll() is None:
                up.kill()
                up.wait()
    gone = binary("ls", cwd=tmp_path, check=False)
    assert gone.returncode == 2 and gone.stderr.startswith("no Redis URL"), gone.stderr
    assert "Traceback" not in log.read_text()
