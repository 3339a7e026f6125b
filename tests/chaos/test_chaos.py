"""Chaos scenarios: faults thrown at real planner and worker processes, judged by a
ledger of every start and finish kept outside Redis.

Short by default (``make test``). ``CRONSVC_CHAOS_SECONDS=600`` makes the mixed, dispatch
and reload scenarios run that long (``make chaos``, ``make chaos CHAOS_SCENARIO=dispatch``);
``CRONSVC_CHAOS_SEED`` repeats the random choices of a run (which faults, which victims;
the timing stays real).
"""

from __future__ import annotations

import json
import os
import random
from collections.abc import Callable
from pathlib import Path

import pytest
import redis

from cronsvc.keys import Keys
from cronsvc.process.redis_server import RedisServer
from tests.chaos.harness import FAULTS, ChaosRun, Scenario

LONG = float(os.environ.get("CRONSVC_CHAOS_SECONDS", "0"))
SCENARIOS = [
    Scenario("worker-kills", 10, ("kill",)),
    Scenario("planner-restarts", 10, ("planner",)),
    Scenario("redis-restarts", 10, ("redis",)),
    Scenario("workers-stopped", 4, ("stop",)),
    # A lease long enough that some spells are shorter than what leases ride out: those
    # must restart no run (the judge counts a rerun they caused as unexplained).
    Scenario("redis-refuses-writes", 8, ("oom", "readonly"), lease="6"),
    Scenario("workers-frozen", 8, ("freeze",)),
    Scenario("rolling-deploy", 4, ("deploy",)),
    Scenario("redis-garbage", 6, ("garbage",)),
    Scenario("limit-kills", 10, ("kill",), limits=True),
    Scenario("mixed", LONG or 12, FAULTS, churn=True),
    # `celery:` jobs into a Celery broker of their own, run by Celery workers: cronsvc's
    # workers killed (most often between a send and its start), the broker and Redis
    # restarted. A fire may be sent twice; it must run once.
    Scenario("dispatch", LONG or 10, ("kill", "redis", "broker"), dispatch=True),
    # Workers run with --reload, their jobs' module rewritten: each supervisor swaps its
    # worker for one on the new code, keeps it on the old code while a version does not
    # import, and starts another when a worker of its is killed. A swap reruns no fire.
    Scenario("reload", LONG or 10, ("swap", "broken", "kill"), reload=True),
]

K = Keys()
pytestmark = [pytest.mark.chaos, pytest.mark.slow]


@pytest.mark.parametrize("scenario", [
    pytest.param(s, id=s.name, marks=pytest.mark.timeout(s.seconds + 300)) for s in SCENARIOS])
def test_chaos(scenario: Scenario, tmp_path: Path,
               fresh_server: Callable[..., RedisServer]) -> None:
    seed = int(os.environ.get("CRONSVC_CHAOS_SEED") or random.randrange(1 << 32))
    print(f"\nchaos scenario {scenario.name}: CRONSVC_CHAOS_SEED={seed}, files in {tmp_path}")
    run = ChaosRun(tmp_path, fresh_server(appendfsync="always"), scenario, seed,
                   fresh_server(appendfsync="always") if scenario.dispatch else None)
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
    logs = run.fleet.logs() + (run.consumers.logs() if run.consumers else "")
    assert totals.ok(), "\n".join([report, *named, run.story(named), logs])
    assert run.exited == [], "\n".join([report, *run.exited, logs])
    if run.copies is not None:  # every fire ran (catch_up all), each copy was decided by
        # the guard, and none ran twice
        twice = [*run.copies.twice, *run.copies.undecided]
        assert run.copies.fires > 0 and not twice and totals.duplicates == 0, \
            "\n".join([report, *twice[:20], run.story(twice), logs])
        assert totals.run == totals.expected, report
    # Each scenario's faults happened, and did what they are for.
    kinds = {f.kind for f in run.faults}
    assert kinds == set(scenario.faults), report
    if "stop" in kinds:
        assert totals.by_policy["missed"] > 0, report
    if scenario.limits:  # the limit was full at times, and held
        assert totals.most_at_once["db"] == (2, 2), report
        assert any(why.startswith("limit db") for why in totals.by_policy), report
    if "garbage" in kinds:  # what is not a fire id left the queue and working set, kept
        raw = redis.Redis.from_url(run.server.url)
        left = {m for key in (K.queue, K.working) for m in raw.zrange(key, 0, -1)}
        aside = [json.loads(x.decode(errors="replace")) for x in raw.lrange(K.malformed, 0, -1)]
        raw.close()
        planted = {m for p in run.planted for m in (*p.queue, *p.working)}
        assert planted and not planted & left, (report, planted & left)
        kept = {(e["key"], e["member"]) for e in aside}
        assert {(K.queue, m.decode(errors="replace")) for p in run.planted for m in p.queue} \
            <= kept, (report, aside[:5])
    if run.code is not None and run.code_runs is not None:  # every fire ran, each worker
        # process on one version of the code, the last version written running at the end
        assert totals.run == totals.expected and totals.duplicates == \
            totals.explained["worker kill -9"], report
        assert run.code_runs.mixed == [] and run.code_runs.last == run.code.versions, report
        assert len(run.code_runs.versions) >= 3, report  # the first, a swap's, the fix
    if scenario.churn:  # schedules came and went, and their fires ran
        assert totals.schedule_calls > 20 and totals.schedule_runs > 0, report
