"""Chains with real processes: a job's success or failure for good triggers others, once
per upstream fire, with the upstream's job, fire, status and output in their payload; a
three-step chain runs in order; an upstream whose worker dies mid-run triggers nothing
until a retry of it really ends."""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

import pytest
import redis

from cronsvc.fires import chain_fire, parse_fire
from cronsvc.testing import BLOCK, Fleet, history, published, read_ledger
from tests.support.wait import wait_for

pytestmark = pytest.mark.slow


def starts(fleet: Fleet, job: str | None = None) -> list[dict[str, Any]]:
    return [e for e in read_ledger(fleet.ledger)
            if e["event"] == "start" and (job is None or e["job"] == job)]


def test_a_three_step_success_chain_runs_once_each_across_two_workers(
        tmp_path: Path, redis_url: str, r: redis.Redis) -> None:
    fleet = Fleet(tmp_path, redis_url, {})
    fleet.write({
        "export": fleet.call_job("0 0 1 1 *", on_success=["import"]),
        "import": fleet.call_job("0 0 1 1 *", on_success=["report"]),
        "report": fleet.call_job("0 0 1 1 *"),
    })
    with fleet.running("w1", "w2"):
        client = published(redis_url, fleet.config)
        first = client.trigger("export")
        wait_for(lambda: len(starts(fleet, "report")) == 1, message="the third step")
        wait_for(lambda: any(h["status"] == "ok" for h in history(r, "report")),
                 message="the chain's end recorded")
    [imp] = starts(fleet, "import")
    [rep] = starts(fleet, "report")
    assert imp["payload"]["upstream"]["fire"] == first
    assert imp["payload"]["upstream"]["status"] == "ok"
    assert rep["payload"]["upstream"] == {**rep["payload"]["upstream"], "job": "import",
                                          "fire": imp["fire"]}
    assert imp["fire"] == chain_fire("import", first, parse_fire(imp["fire"])[1])
    assert [e["job"] for e in starts(fleet)] == ["export", "import", "report"]
    # The history of each downstream job names the fire whose end queued its run.
    [link] = [h for h in history(r, "import") if h["status"] == "chained"]
    assert (link["fire"], link["reason"]) == (imp["fire"], f"after {first}: ok")
    [link] = [h for h in history(r, "report") if h["status"] == "chained"]
    assert link["reason"] == f"after {imp['fire']}: ok"


def test_a_failure_for_good_triggers_on_failure_once_and_a_retry_does_not(
        tmp_path: Path, redis_url: str, r: redis.Redis) -> None:
    fleet = Fleet(tmp_path, redis_url, {})
    fleet.write({
        "flaky": {"command": ["sh", "-c", "echo upstream 503; exit 2"], "retries": 1,
                  "backoff": "0.1s", "on_failure": ["alert"], "on_success": ["next"]},
        "alert": fleet.call_job("0 0 1 1 *"),
        "next": fleet.call_job("0 0 1 1 *"),
    })
    with fleet.running("w1", "w2"):
        client = published(redis_url, fleet.config)
        fid = client.trigger("flaky")
        wait_for(lambda: len(starts(fleet, "alert")) == 1, message="the failure chain")
        wait_for(lambda: client.fire_state(fid) == "dead", message="the upstream dead")
    [alert] = starts(fleet, "alert")
    upstream = alert["payload"]["upstream"]
    assert (upstream["fire"], upstream["attempt"]) == (fid, 2)
    assert "upstream 503" in upstream["output"] and starts(fleet, "next") == []
    assert [h["reason"] for h in history(r, "alert") if h["status"] == "chained"] == [
        f"after {fid}: failed"]  # its last attempt's status


def test_an_upstream_killed_mid_run_triggers_nothing_until_it_really_ends(
        tmp_path: Path, redis_url: str, r: redis.Redis) -> None:
    fleet = Fleet(tmp_path, redis_url, {})
    fleet.write({"slow": fleet.call_job("0 0 1 1 *", call=BLOCK, on_success=["after"]),
                 "after": fleet.call_job("0 0 1 1 *")})
    try:
        fleet.planner()
        fleet.worker("w1", "--lease", "1")
        client = published(redis_url, fleet.config)
        fid = client.trigger("slow")
        wait_for(lambda: len(starts(fleet, "slow")) == 1, message="the first attempt")
        fleet.signal("w1", signal.SIGKILL)
        fleet.wait("w1")
        fleet.worker("w2", "--lease", "1")
        wait_for(lambda: len(starts(fleet, "slow")) == 2, message="the retry after the kill")
        assert starts(fleet, "after") == []  # the killed attempt ended nothing
        Path(fleet.release).touch()
        wait_for(lambda: len(starts(fleet, "after")) == 1, message="the chain, once")
    finally:
        fleet.stop_all()
    ledger = read_ledger(fleet.ledger)
    ended = next(e["at_ms"] for e in ledger if e["event"] == "end" and e["job"] == "slow")
    [after] = starts(fleet, "after")
    assert after["at_ms"] >= ended and after["payload"]["upstream"]["fire"] == fid


def test_validate_rejects_unknown_jobs_and_cycles_in_chains() -> None:
    from cronsvc.config.models import parse_config
    from cronsvc.errors import ConfigError

    text = ("jobs:\n"
            "  a: {cron: '@daily', command: [x], on_success: [b]}\n"
            "  b: {cron: '@daily', command: [x], on_success: [c], on_failure: [reprot]}\n"
            "  c: {cron: '@daily', command: [x], on_failure: [a]}\n"
            "  report: {cron: '@daily', command: [x]}\n")
    with pytest.raises(ConfigError) as bad:
        parse_config(text, "s.yaml")
    assert bad.value.problems == [
        "s.yaml:3: jobs.b.on_failure: unknown job 'reprot'; did you mean 'report'?",
        "s.yaml:4: jobs.c.on_failure: a chain that comes back: a -> b -> c -> a"]


def test_ls_shows_what_a_job_s_end_triggers(tmp_path: Path, redis_url: str) -> None:
    from click.testing import CliRunner

    from cronsvc.cli.main import main
    from tests.support.cli import ok

    fleet = Fleet(tmp_path, redis_url, {})
    fleet.write({"export": fleet.call_job("0 0 1 1 *", on_success=["import"],
                                          on_failure=["alert"]),
                 "import": fleet.call_job("0 0 1 1 *"), "alert": fleet.call_job("0 0 1 1 *")})
    published(redis_url, fleet.config)
    said = ok(CliRunner().invoke(main, ["ls", "--wide", "--config", str(fleet.config)],
                                 env={"CRONSVC_REDIS_URL": redis_url}))
    assert "ok: import; failed: alert" in said
