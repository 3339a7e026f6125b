"""Backfill with real processes: after a worker outage, a backfill of the range runs
exactly the fires that were skipped, each once, and the same backfill again runs nothing;
the CLI's dry run lists them first, and the history and audit log say who asked."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
import redis
from click.testing import CliRunner, Result

from cronsvc.cli.main import main
from cronsvc.clock import redis_ms
from cronsvc.errors import CronsvcError
from cronsvc.fires import fire_id
from cronsvc.ran import REACH_MS
from cronsvc.testing import RECORD, Fleet, history, read_ledger
from tests.support.cli import error_line, ok
from tests.support.wait import wait_for

pytestmark = pytest.mark.slow


def started(fleet: Fleet) -> Counter[str]:
    return Counter(e["fire"] for e in read_ledger(fleet.ledger) if e["event"] == "start")


def test_a_backfill_over_an_outage_runs_exactly_the_missing_fires_once(
        tmp_path: Path, redis_url: str, r: redis.Redis) -> None:
    fleet = Fleet(tmp_path, redis_url, {})
    # Every second; after an outage, catch_up latest runs the newest fire and skips the rest.
    fleet.write({"tick": {"every": "1s", "catch_up": "latest", "call": RECORD,
                          "kwargs": {"path": fleet.ledger}}})
    fleet.planner()
    fleet.worker("w1")
    client = fleet.client()
    wait_for(lambda: len(started(fleet)) >= 2, message="the first runs")
    fleet.signal("w1")  # the outage (a worker stopped: what it ran, it finished)
    fleet.wait("w1")
    down = redis_ms(r)
    wait_for(lambda: redis_ms(r) > down + 4000, message="four fires due while no worker runs")
    fleet.worker("w2")
    start_ms = min(int(f.split("@")[1]) for f in started(fleet))
    end_ms = down - down % 1000 + 3000  # a fire due in the outage
    due = {fire_id("tick", d) for d in range(start_ms, end_ms + 1, 1000)}

    def ended() -> dict[str, str]:
        return {h["fire"]: h["status"] for h in history(r, "tick") if h["fire"] in due}

    # Each fire of the range ran before the outage, or was skipped by the worker back.
    wait_for(lambda: set(ended()) == due, message="every fire of the range recorded")
    missing = {f for f, status in ended().items() if status == "skipped"}
    def in_range() -> Counter[str]:  # (w2 runs the fires due after the range meanwhile)
        return Counter({f: n for f, n in started(fleet).items() if f in due})

    before = in_range()
    assert len(missing) >= 3 and missing == due - set(before)

    dry = client.backfill("tick", start_ms, end_ms, dry_run=True)
    assert {f.fire for f in dry.to_run} == missing == due - set(before)
    assert in_range() == before  # a dry run runs nothing

    done = client.backfill("tick", start_ms, end_ms, max_concurrent=2)
    assert {f.fire for f in done.fires if f.queued} == missing
    assert {f.state for f in done.fires if f.queued} == {"ran"}
    after = started(fleet)
    assert {f for f in after if f in due} == due  # every fire of the range ran...
    assert max(after[f] for f in due) == 1  # ...once

    again = client.backfill("tick", start_ms, end_ms)
    assert again.to_run == [] and {f.state for f in again.fires} == {"ran"}
    assert max(started(fleet)[f] for f in due) == 1
    [line] = [h for h in history(r, "tick") if h["status"] == "backfill"]
    assert line["reason"].startswith(f"{client.actor}: {len(missing)} of {len(due)}, ")
    [entry] = [a for a in client.audit().actions if a.action == "backfill"]
    assert entry.target == "tick" and entry.detail["fires"] == len(missing)
    fleet.stop_all()


def test_the_cli_dry_run_lists_the_fires_and_refuses_what_it_cannot_do(
        tmp_path: Path, redis_url: str, r: redis.Redis) -> None:
    fleet = Fleet(tmp_path, redis_url, {})
    fleet.write({"report": fleet.call_job("0 * * * *", timezone="Europe/Berlin"),
                 "everywhere": fleet.call_job("0 * * * *", pool="each-host"),
                 "hook": {"call": "cronsvc.testing.ledger:record",
                          "kwargs": {"path": fleet.ledger}}})
    client = fleet.client()
    client.publish_config()
    now = redis_ms(r)
    hour = now - now % 3_600_000
    runner = CliRunner()

    def cli(*args: str) -> Result:
        return runner.invoke(main, ["backfill", *args, "--config", str(fleet.config),
                                    "--redis-url", redis_url])

    lines = ok(cli("report", "--from", "-3h", "--dry-run")).splitlines()
    fires = [fire_id("report", hour - k * 3_600_000) for k in (2, 1, 0)]
    assert lines[0].startswith("backfill report from ")
    assert lines[0].endswith("(dry run): 3 fires, 3 would run"), lines[0]
    assert [line.split()[0] for line in lines[1:]] == fires
    assert all(line.endswith("would run") and ("CET" in line or "CEST" in line)
               for line in lines[1:])
    as_json = json.loads(ok(cli("report", "--from", "-3h", "--dry-run", "--json")))
    assert [f["fire"] for f in as_json["fires"]] == fires
    assert not set(fires) & set(r.zrange("cron:queue", 0, -1))  # a dry run queues nothing

    assert "unknown job 'reprot'" in error_line(cli("reprot", "--from", "-1h"), 1)
    assert "nor a runtime schedule" in error_line(cli("reprot", "--from", "-1h"), 1)
    days = REACH_MS // 86_400_000
    assert f"more than {days} days ago" in error_line(cli("report", "--from", "-40d"), 1)
    assert "no schedule" in error_line(cli("hook", "--from", "-1h"), 1)
    assert "each-host cannot be backfilled" in error_line(cli("everywhere", "--from", "-1h"), 1)
    assert "not an ISO 8601 time" in error_line(cli("report", "--from", "yesterday"), 1)
    assert "is empty" in error_line(cli("report", "--from", "-1h", "--to", "-2h"), 1)
    fleet.worker("w1")
    try:
        out = ok(cli("report", "--from", "-3h", "--max-concurrent", "2")).splitlines()
    finally:
        fleet.stop_all()
    assert out[0].endswith(": 3 fires, 3 to run")
    assert sorted(line.split()[0] for line in out[1:4]) == fires  # as each ended
    assert all(line.endswith("  ran") for line in out[1:4]) and len(out) == 5
    assert out[-1] == "backfilled report: 3 fires queued: 3 ran"
    assert ok(cli("report", "--from", "-3h")).splitlines()[0].endswith(
        ": 3 fires, 0 to run, 3 ran")
    client.pause("report")
    assert "is paused" in error_line(cli("report", "--from", "-1h"), 1)


def test_a_runtime_schedule_is_backfilled_under_its_fire_ids_with_its_payload(
        tmp_path: Path, redis_url: str, r: redis.Redis) -> None:
    fleet = Fleet(tmp_path, redis_url, {})
    fleet.write({"report": fleet.call_job("0 0 1 1 *")})
    client = fleet.client()
    client.publish_config()
    now = redis_ms(r)
    client.upsert_schedule("acct-7", job="report", cron="0 * * * *", payload={"acct": 7},
                           start=now - 86_400_000)
    hour = now - now % 3_600_000
    fires = [fire_id("report", hour - k * 3_600_000, schedule="acct-7") for k in (2, 1, 0)]
    fleet.worker("w1")
    try:
        done = client.backfill("acct-7", "-3h", max_concurrent=3)
        again = client.backfill("acct-7", "-3h")
    finally:
        fleet.stop_all()
    assert [f.fire for f in done.fires] == fires and done.schedule == "acct-7"
    assert [f.state for f in done.fires] == ["ran"] * 3
    runs = [e for e in read_ledger(fleet.ledger) if e["event"] == "start"]
    assert sorted(e["fire"] for e in runs) == fires
    assert all(e["payload"] == {"acct": 7} for e in runs)
    assert again.to_run == [] and [f.state for f in again.fires] == ["ran"] * 3
    client.pause_schedule("acct-7")
    with pytest.raises(CronsvcError, match="schedule acct-7 is paused"):
        client.backfill("acct-7", "-3h")
