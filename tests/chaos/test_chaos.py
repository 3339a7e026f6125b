"""Chaos scenarios: faults thrown at real planner and worker processes, judged by a
ledger of every start and finish kept outside Redis.

Short by default (``make test``). ``CRONSVC_CHAOS_SECONDS=600`` makes the mixed
scenario run that long (``make chaos``); ``CRONSVC_CHAOS_SEED`` repeats the random
choices of a run (which faults, which victims; the timing stays real).
"""

from __future__ import annotations

import os
import random
from collections.abc import Callable
from pathlib import Path

import pytest

from cronsvc.process.redis_server import RedisServer
from tests.chaos.harness import FAULTS, ChaosRun, Scenario

LONG = float(os.environ.get("CRONSVC_CHAOS_SECONDS", "0"))
SCENARIOS = [
    Scenario("worker-kills", 10, ("kill",)),
    Scenario("planner-restarts", 10, ("planner",)),
    Scenario("redis-restarts", 10, ("redis",)),
    Scenario("workers-stopped", 4, ("stop",)),
    Scenario("redis-refuses-writes", 8, ("oom", "readonly")),
    Scenario("workers-frozen", 8, ("freeze",)),
    Scenario("rolling-deploy", 4, ("deploy",)),
    Scenario("limit-kills", 10, ("kill",), limits=True),
    Scenario("mixed", LONG or 12, FAULTS, churn=True),
]

pytestmark = [pytest.mark.chaos, pytest.mark.slow]


@pytest.mark.parametrize("scenario", [
    pytest.param(s, id=s.name, marks=pytest.mark.timeout(s.seconds + 300)) for s in SCENARIOS])
def test_chaos(scenario: Scenario, tmp_path: Path,
               fresh_server: Callable[..., RedisServer]) -> None:
    seed = int(os.environ.get("CRONSVC_CHAOS_SEED") or random.randrange(1 << 32))
    print(f"\nchaos scenario {scenario.name}: CRONSVC_CHAOS_SEED={seed}, files in {tmp_path}")
    run = ChaosRun(tmp_path, fresh_server(appendfsync="always"), scenario, seed)
    try:
        totals = run.run()
    finally:
        run.close()
    report = run.report(totals)
    print("\n" + report)
    assert totals.expected > 0 and totals.run > 0, report
    problems = (totals.lost, totals.unexplained, totals.early, totals.strangers,
                totals.overlapping, totals.wrong_definition, totals.orphans, totals.stale,
                totals.over_limit)
    named = [p for found in problems for p in found[:20]]
    assert totals.ok(), "\n".join([report, *named, run.story(named), run.fleet.logs()])
    # Each scenario's faults happened, and did what they are for.
    kinds = {f.kind for f in run.faults}
    assert kinds == set(scenario.faults), report
    if "stop" in kinds:
        assert totals.by_policy["missed"] > 0, report
    if scenario.limits:  # the limit was full at times, and held
        assert totals.most_at_once["db"] == (2, 2), report
        assert any(why.startswith("limit db") for why in totals.by_policy), report
    if scenario.churn:  # schedules came and went, and their fires ran
        assert totals.schedule_calls > 20 and totals.schedule_runs > 0, report
