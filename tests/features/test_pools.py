"""Worker pools with real processes: a worker runs only the fires of the pools it serves,
the default pool keeps the contract keys, a pool nobody serves is visible as such, a job
moved to another pool takes its fires along, and one pool's flood does not starve another."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import redis
from click.testing import CliRunner

from cronsvc.cli.main import main
from cronsvc.keys import Keys
from cronsvc.testing import Fleet, published, read_ledger
from tests.support.cli import ok
from tests.support.wait import wait_for

pytestmark = pytest.mark.slow
K = Keys()


def starts(fleet: Fleet) -> list[dict[str, Any]]:
    return [e for e in read_ledger(fleet.ledger) if e["event"] == "start"]


def test_each_worker_runs_only_the_pools_it_serves(tmp_path: Path, redis_url: str,
                                                   r: redis.Redis) -> None:
    fleet = Fleet(tmp_path, redis_url, {})
    fleet.write({"train": fleet.call_job("0 0 1 1 *", pool="gpu"),
                 "report": fleet.call_job("0 0 1 1 *")})
    with fleet.running(planner=False):
        client = published(redis_url, fleet.config)
        fleet.worker("cpu-1")
        gpu_fire = client.trigger("train")
        assert r.zscore("cron:queue:gpu", gpu_fire) is not None  # its pool's own queue
        report_fire = client.trigger("report")
        wait_for(lambda: [e["fire"] for e in starts(fleet)] == [report_fire],
                 message="the default pool's fire, on the default worker")
        # Nobody serves gpu: the fire waits, and status and queue say why.
        view = client.queue()
        [waiting] = [q for q in view.due if q.fire == gpu_fire]
        assert (waiting.pool, waiting.served) == ("gpu", False)
        env = {"CRONSVC_REDIS_URL": redis_url}
        said = CliRunner().invoke(main, ["status", "--config", str(fleet.config)], env=env)
        assert "pool gpu: no live worker serves it; 1 fire(s) due wait" in said.output
        listing = ok(CliRunner().invoke(main, ["queue", "--config", str(fleet.config)], env=env))
        assert "gpu (no live worker serves it)" in listing
        fleet.worker("gpu-1", "--pools", "gpu")
        wait_for(lambda: len(starts(fleet)) == 2, message="the gpu fire, on the gpu worker")
    ran = {e["fire"]: e["worker"] for e in starts(fleet)}
    assert ran == {report_fire: "cpu-1", gpu_fire: "gpu-1"}
    assert r.zcard(K.working) == 0 and r.zcard("scheduler:working:gpu") == 0


def test_a_job_moved_to_another_pool_takes_its_fires_along(tmp_path: Path, redis_url: str,
                                                           r: redis.Redis) -> None:
    fleet = Fleet(tmp_path, redis_url, {"tick": {"cron": "*/5 * * * *", "command": ["true"]}})
    with fleet.running():
        wait_for(lambda: r.zcard(K.queue) > 0, message="fires planned in the default queue")
        fleet.write({"tick": {"cron": "*/5 * * * *", "command": ["true"], "pool": "batch"}})
        wait_for(lambda: r.zcard(K.queue) == 0 and r.zcard("cron:queue:batch") > 0,
                 message="the fires moved to the batch pool's queue")
    client = published(redis_url, fleet.config)
    assert client.job("tick").pool == "batch"
    env = {"CRONSVC_REDIS_URL": redis_url}
    assert "batch" in ok(CliRunner().invoke(main, ["ls", "--wide", "--config",
                                                   str(fleet.config)], env=env))


def test_a_flood_in_one_pool_does_not_starve_another(tmp_path: Path, redis_url: str,
                                                     r: redis.Redis) -> None:
    fleet = Fleet(tmp_path, redis_url, {})
    fleet.write({"bulk": fleet.call_job("0 0 1 1 *"),
                 "urgent": fleet.call_job("0 0 1 1 *", pool="fast")})
    client = published(redis_url, fleet.config)
    bulk = [client.trigger("bulk") for _ in range(300)]
    urgent = client.trigger("urgent")  # queued after all of them
    fleet.worker("w1", "--pools", "default,fast", "--concurrency", "1")
    try:
        wait_for(lambda: urgent in [e["fire"] for e in starts(fleet)], timeout=60,
                 message="the fast pool's fire")
    finally:
        fleet.stop_all()
    order = [e["fire"] for e in starts(fleet)]
    assert order.index(urgent) < 5, f"the fast fire waited behind {order.index(urgent)} others"
    assert set(order) <= {*bulk, urgent}
