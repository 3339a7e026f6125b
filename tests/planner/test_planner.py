"""The planner against a real Redis: publishing, planning, edits, reloads, the CLI."""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import threading
from datetime import UTC, datetime
from pathlib import Path

import pytest
import redis
from click.testing import CliRunner

from cronsvc.cli.main import main
from cronsvc.clock import FixedClock, dt_to_ms
from cronsvc.config.models import Job, load_config
from cronsvc.fires import fire_id, parse_fire
from cronsvc.keys import Keys, keys_for
from cronsvc.planner import planner as planner_mod
from cronsvc.planner import publish as planning
from cronsvc.planner.planner import Planner
from cronsvc.planner.publish import policy_line
from cronsvc.policy import Policy
from cronsvc.schedule.expand import occurrences_ms
from tests.support.paths import CRONSVC
from tests.support.wait import wait_for

T0 = dt_to_ms(datetime(2030, 1, 1, 0, 0, 30, tzinfo=UTC))
HOUR = 3600_000
K = Keys()

TWO_JOBS = """
jobs:
  every5:
    cron: "*/5 * * * *"
    command: ["true"]
  hourly:
    cron: "0 * * * *"
    timezone: Europe/Berlin
    command: ["true"]
"""


def write(path: Path, text: str) -> Path:
    """Write the file so that its mtime or size surely changes."""
    before = path.stat().st_mtime_ns if path.exists() else 0
    path.write_text(text)
    os.utime(path, ns=(before + 10**9, before + 10**9))
    return path


@pytest.fixture
def cfg(tmp_path: Path) -> Path:
    return write(tmp_path / "schedules.yaml", TWO_JOBS)


@pytest.fixture
def clock() -> FixedClock:
    return FixedClock(T0)


def make(cfg: Path, r: redis.Redis, clock: FixedClock, **kw: object) -> Planner:
    return Planner(cfg, r, clock=clock, **kw)  # type: ignore[arg-type]


def expected(cfg: Path, name: str, start: int, end: int) -> list[str]:
    job = load_config(cfg).jobs[name]
    return [fire_id(name, due) for due in occurrences_ms(job, start, end)]


def queued(r: redis.Redis, job: str | None = None, keys: Keys = K) -> list[str]:
    fires = r.zrange(keys.queue, 0, -1)
    return [f for f in fires if job is None or f.startswith(job + "@")]


def test_publishes_and_plans_the_horizon_exactly(cfg: Path, r: redis.Redis,
                                                 clock: FixedClock) -> None:
    stats = make(cfg, r, clock).tick()
    config = load_config(cfg)
    assert r.hgetall(K.jobs) == {n: policy_line(j) for n, j in config.jobs.items()}
    assert json.loads(r.hget(K.specs, "hourly")) == {
        "cron": "0 * * * *", "timezone": "Europe/Berlin", "jitter": 0.0}
    end = T0 + 2 * HOUR
    for name in ("every5", "hourly"):
        assert queued(r, name) == expected(cfg, name, T0, end)
        assert r.hget(K.watermarks, name) == str(end)
    assert stats.added == len(queued(r)) == 24 + 2
    assert (stats.jobs, stats.stale) == (2, 0)
    assert all(score == int(f.split("@")[1]) for f, score in r.zrange(K.queue, 0, -1,
                                                                      withscores=True))


def test_second_tick_adds_nothing_and_time_moves_the_window(cfg: Path, r: redis.Redis,
                                                            clock: FixedClock) -> None:
    p = make(cfg, r, clock)
    first = p.tick().added
    assert p.tick().added == 0
    clock.advance(HOUR)
    third = p.tick().added
    assert third == 12 + 1
    assert len(queued(r)) == first + third
    assert queued(r, "every5") == expected(cfg, "every5", T0, T0 + 3 * HOUR)


@pytest.mark.parametrize(("fields", "line"), [
    ({}, "latest|0|allow|1|0"),
    ({"catch_up": "none"}, "none|60000|allow|1|0"),
    ({"catch_up": "none", "starting_deadline": 5}, "none|5000|allow|1|0"),
    ({"catch_up": "all", "starting_deadline": 1.5, "overlap": "forbid"}, "all|1500|forbid|1|0"),
    ({"retries": 3, "paused": True, "overlap": "replace"}, "latest|0|replace|4|1"),
])
def test_policy_line(fields: dict[str, object], line: str) -> None:
    job = Job(name="j", cron="* * * * *", command=("true",), **fields)  # type: ignore[arg-type]
    assert policy_line(job) == f"{job.digest}|{line}|{job.definition}"
    assert Policy.parse(policy_line(job)) == Policy.of(job)


def test_a_fire_that_ran_is_never_planned_again(cfg: Path, r: redis.Redis,
                                                clock: FixedClock) -> None:
    make(cfg, r, clock).tick()
    first = queued(r)[0]
    r.zrem(K.queue, first)  # a worker claimed, ran and acked it
    make(cfg, r, clock, planner_id="other").tick()
    assert first not in queued(r)


def test_planners_ticking_concurrently_plan_every_fire_once(cfg: Path, r: redis.Redis,
                                                            clock: FixedClock) -> None:
    planners = [make(cfg, r, clock, planner_id=f"p{i}", horizon=1800) for i in range(3)]
    ran: list[str] = []
    for _round in range(12):
        barrier = threading.Barrier(len(planners))
        errors: list[BaseException] = []

        def tick(p: Planner, barrier: threading.Barrier = barrier,
                 errors: list[BaseException] = errors) -> None:
            try:
                barrier.wait()
                p.tick()
            except BaseException as exc:  # reported below, in the test thread
                errors.append(exc)

        threads = [threading.Thread(target=tick, args=(p,)) for p in planners]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors
        # Play the workers: every due fire runs and leaves the queue.
        due = r.zrangebyscore(K.queue, "-inf", clock.now_ms())
        ran += due
        if due:
            r.zrem(K.queue, *due)
        clock.advance(10 * 60_000)
    assert len(ran) == len(set(ran))
    now = clock.now_ms() - 10 * 60_000
    assert sorted(ran) == sorted(expected(cfg, "every5", T0, now) + expected(cfg, "hourly", T0,
                                                                             now))
    assert set(r.zrange(K.planners, 0, -1)) == {"p0", "p1", "p2"}


def test_editing_the_cron_replaces_the_queued_fires(cfg: Path, r: redis.Redis,
                                                    clock: FixedClock) -> None:
    p = make(cfg, r, clock)
    p.tick()
    clock.advance(12 * 60_000)  # some old fires are due now, not yet run
    old = queued(r, "every5")
    write(cfg, TWO_JOBS.replace("*/5 * * * *", "*/7 * * * *"))
    p.tick()
    now = clock.now_ms()
    assert queued(r, "every5") == expected(cfg, "every5", now, now + 2 * HOUR)
    assert queued(r, "hourly") == expected(cfg, "hourly", T0, T0 + 2 * HOUR + 12 * 60_000)
    # The unqueued fires are in the job's history: how many, which, and why.
    (record,) = [json.loads(x) for x in r.lrange(K.history("every5"), 0, -1)]
    assert (record["status"], record["reason"]) == ("replaced", "replaced: definition changed")
    # Two hours of */5, the ones due already but not run included.
    assert (record["first"], record["last"], record["fires"]) == (
        parse_fire(old[0])[1], parse_fire(old[-1])[1], len(old))


def test_removing_a_job_removes_its_fires_and_state(cfg: Path, r: redis.Redis,
                                                    clock: FixedClock) -> None:
    p = make(cfg, r, clock)
    p.tick()
    every5, hourly = queued(r, "every5"), queued(r, "hourly")
    assert len(hourly) == 2
    clock.advance(2 * HOUR)  # every fire of the horizon is due, none ran
    write(cfg, TWO_JOBS.split("  hourly:")[0])
    p.tick()
    assert queued(r, "hourly") == []
    assert queued(r, "every5")[:len(every5)] == every5
    for key in (K.jobs, K.specs, K.watermarks):
        assert not r.hexists(key, "hourly")
    (record,) = [json.loads(x) for x in r.lrange(K.history("hourly"), 0, -1)]
    assert (record["status"], record["reason"], record["fires"]) == (
        "removed", "removed: job deleted from the file", 2)
    assert [record["first"], record["last"]] == [parse_fire(f)[1] for f in hourly]


def test_policy_only_change_keeps_the_queue(cfg: Path, r: redis.Redis,
                                            clock: FixedClock) -> None:
    p = make(cfg, r, clock)
    p.tick()
    before = r.zrange(K.queue, 0, -1, withscores=True)
    marks = r.hgetall(K.watermarks)
    write(cfg, TWO_JOBS.replace('command: ["true"]\n  hourly', 'command: ["true"]\n'
                                '    overlap: forbid\n    retries: 2\n  hourly'))
    assert p.tick().added == 0
    assert r.zrange(K.queue, 0, -1, withscores=True) == before
    assert r.hgetall(K.watermarks) == marks
    every5 = load_config(cfg).jobs["every5"]
    assert r.hget(K.jobs, "every5").endswith(f"|latest|0|forbid|3|0|{every5.definition}")


def test_a_broken_file_keeps_the_last_good_config(cfg: Path, r: redis.Redis, clock: FixedClock,
                                                  caplog: pytest.LogCaptureFixture) -> None:
    p = make(cfg, r, clock)
    p.tick()
    good = p.config
    write(cfg, TWO_JOBS.replace("*/5 * * * *", "61 * * * *"))
    with caplog.at_level(logging.ERROR, logger="cronsvc.planner"):
        clock.advance(HOUR)
        assert p.tick().added == 13  # still planning the old definitions
    assert p.config is good
    located = [m for m in caplog.messages if "jobs.every5.cron" in m]
    assert len(located) == 1 and "61" in located[0] and str(cfg) in located[0]
    assert any("keeping the last good config" in m for m in caplog.messages)
    write(cfg, TWO_JOBS.replace("*/5 * * * *", "*/10 * * * *"))
    p.tick()
    assert p.config.jobs["every5"].cron == "*/10 * * * *"


def test_a_new_job_in_the_file_is_planned_at_the_next_tick(cfg: Path, r: redis.Redis,
                                                           clock: FixedClock) -> None:
    p = make(cfg, r, clock)
    p.tick()
    write(cfg, TWO_JOBS + '  daily:\n    cron: "30 1 * * *"\n    command: ["true"]\n')
    clock.advance(1000)
    p.tick()
    assert queued(r, "daily") == expected(cfg, "daily", T0 + 1000, T0 + 1000 + 2 * HOUR) != []


def test_shards_keep_each_job_on_its_own_keys(tmp_path: Path, r: redis.Redis,
                                              clock: FixedClock) -> None:
    names = [f"job{i}" for i in range(8)]
    text = "redis:\n  shards: 3\n  prefix: 'x:'\njobs:\n" + "".join(
        f'  {n}:\n    cron: "*/30 * * * *"\n    command: ["true"]\n' for n in names)
    cfg = write(tmp_path / "s.yaml", text)
    make(cfg, r, clock).tick()
    shards_used = set()
    for n in names:
        keys = keys_for(n, 3, "x:")
        shards_used.add(keys.shard)
        assert keys.queue.startswith("x:") and "{" in keys.queue
        assert queued(r, n, keys) == expected(cfg, n, T0, T0 + 2 * HOUR)
        assert r.hget(keys.jobs, n)
    assert len(shards_used) > 1
    assert not r.exists(K.queue)
    # Every shard holds every job's line, for the runtime schedules whose ids land there.
    lines = {n: r.hget(keys_for(n, 3, "x:").jobs, n) for n in names}
    for k in range(3):
        assert r.hgetall(Keys(prefix="x:", shard=k).job_lines) == lines

    # A job removed or changed is so in every copy.
    kept = text.split("  job7:")[0].replace('command: ["true"]', 'command: ["false"]', 1)
    write(cfg, kept)
    clock.advance(60_000)
    make(cfg, r, clock).tick()
    for k in range(3):
        mirror = r.hgetall(Keys(prefix="x:", shard=k).job_lines)
        assert sorted(mirror) == names[:7]
        assert mirror["job0"] == r.hget(keys_for("job0", 3, "x:").jobs, "job0")
        assert mirror["job0"] != lines["job0"]


def test_heartbeat_and_clean_unregister(cfg: Path, r: redis.Redis, clock: FixedClock) -> None:
    p = make(cfg, r, clock, planner_id="host:1")
    p.tick()
    assert r.zscore(K.planners, "host:1") == T0
    info = json.loads(r.hget(K.planner_info, "host:1"))
    assert (info["jobs"], info["added"], info["last_tick"]) == (2, 26, T0)
    p.unregister()
    assert not r.exists(K.planners) and not r.exists(K.planner_info)


def test_big_expansions_are_split_into_bounded_calls(tmp_path: Path, r: redis.Redis,
                                                     clock: FixedClock,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(planner_mod, "MAX_FIRES_PER_CALL", 7)
    text = "jobs:\n" + "".join(
        f'  j{i}:\n    cron: "{c}"\n    command: ["true"]\n'
        for i, c in enumerate(["* * * * *", "*/5 * * * *", "0 0 1 1 *", "*/2 * * * *"]))
    cfg = write(tmp_path / "big.yaml", text)
    p = make(cfg, r, clock, horizon=3600)
    sizes: list[int] = []
    real_plan = p.scripts.plan

    def spy(keys: Keys, entries: list[tuple[str, str, int, list[int]]], **kw: object) -> object:
        sizes.append(sum(len(e[3]) for e in entries))
        return real_plan(keys, entries, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(p.scripts, "plan", spy)
    stats = p.tick()
    assert max(sizes) <= 7 and len(sizes) > 10
    for i in range(4):
        assert queued(r, f"j{i}") == expected(cfg, f"j{i}", T0, T0 + HOUR)
        assert r.hget(K.watermarks, f"j{i}") == str(T0 + HOUR)
    assert stats.added == 60 + 12 + 30


def test_edit_with_many_queued_fires_unqueues_them_in_chunks(
        tmp_path: Path, r: redis.Redis, clock: FixedClock,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(planning, "MAX_FIRES_PER_CALL", 5)
    cfg = write(tmp_path / "m.yaml", 'jobs:\n  m:\n    cron: "* * * * *"\n    command: ["x"]\n')
    p = make(cfg, r, clock)
    p.tick()
    assert len(queued(r)) == 120
    write(cfg, 'jobs:\n  m:\n    cron: "*/30 * * * *"\n    command: ["x"]\n')
    p.tick()
    assert queued(r) == expected(cfg, "m", T0, T0 + 2 * HOUR)


def test_fires_due_soon_wake_the_workers(tmp_path: Path, r: redis.Redis,
                                         clock: FixedClock) -> None:
    cfg = write(tmp_path / "w.yaml", 'jobs:\n  s:\n    cron: "* * * * * *"\n    command: ["x"]\n')
    pubsub = r.pubsub(ignore_subscribe_messages=True)
    pubsub.subscribe(K.wakeup)
    wait_for(lambda: r.pubsub_numsub(K.wakeup)[0][1] == 1, message="subscription")
    stats = make(cfg, r, clock, horizon=60).tick()
    assert stats.wakeups == 1
    assert wait_for(lambda: pubsub.get_message(timeout=0.05), message="wake-up message")
    pubsub.close()


def test_a_long_outage_plans_one_lookback_not_everything(
        cfg: Path, r: redis.Redis, clock: FixedClock, caplog: pytest.LogCaptureFixture) -> None:
    p = make(cfg, r, clock)
    p.tick()
    r.delete(K.queue)
    clock.advance(30 * 24 * HOUR)
    with caplog.at_level(logging.WARNING, logger="cronsvc.planner"):
        p.tick()
    now = clock.now_ms()
    assert queued(r, "hourly") == expected(cfg, "hourly", now - 24 * HOUR, now + 2 * HOUR)
    assert any("are not planned" in m for m in caplog.messages)


def test_a_definition_published_by_someone_else_is_published_again(
        cfg: Path, r: redis.Redis, clock: FixedClock) -> None:
    p = make(cfg, r, clock)
    p.tick()
    r.hset(K.jobs, "hourly", "aaaaaaaaaaaa|latest|0|allow|1|0")  # another planner's file
    clock.advance(HOUR)
    assert p.tick().stale == 1
    assert p.tick().stale == 0
    assert r.hget(K.jobs, "hourly") == policy_line(p.config.jobs["hourly"])


def test_run_forever_ticks_at_once_reloads_on_request_and_stops(
        cfg: Path, r: redis.Redis) -> None:
    p = Planner(cfg, r, planner_id="loop", tick=3600)
    t = threading.Thread(target=p.run_forever)
    t.start()
    try:
        wait_for(lambda: queued(r, "every5"), message="first tick")
        write(cfg, TWO_JOBS + '  added:\n    cron: "* * * * *"\n    command: ["true"]\n')
        p.request_reload()
        wait_for(lambda: queued(r, "added"), message="reloaded job planned")
    finally:
        p.stop()
        t.join(timeout=30)
    assert not t.is_alive()
    assert r.zscore(K.planners, "loop") is None


def test_cli_unreachable_redis_is_one_line_and_exit_2(cfg: Path) -> None:
    result = CliRunner().invoke(main, ["planner", "--config", str(cfg),
                                       "--redis-url", "redis://127.0.0.1:1/0"])
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("cannot reach Redis at redis://127.0.0.1:1/0")


def test_cli_without_any_redis_url_says_how_to_set_one(cfg: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CRONSVC_REDIS_URL", raising=False)
    result = CliRunner().invoke(main, ["planner", "--config", str(cfg)])
    assert result.exit_code == 2
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and "CRONSVC_REDIS_URL" in lines[0] and "cronsvc up" in lines[0]


def test_cli_planner_process_plans_reloads_on_sighup_and_stops_cleanly(
        cfg: Path, r: redis.Redis, redis_url: str) -> None:
    proc = subprocess.Popen(
        [str(CRONSVC), "planner", "--config", str(cfg),
         "--redis-url", redis_url, "--tick", "1h", "--horizon", "30m"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        wait_for(lambda: queued(r, "every5"), message="fires planned by the process")
        # Its heartbeat is written once the tick has planned.
        wait_for(lambda: r.zcard(K.planners) == 1, message="the planner's heartbeat")
        write(cfg, TWO_JOBS + '  added:\n    cron: "* * * * *"\n    command: ["true"]\n')
        proc.send_signal(signal.SIGHUP)
        wait_for(lambda: queued(r, "added"), message="job added by SIGHUP planned")
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, out
    assert r.zcard(K.planners) == 0
    assert "Traceback" not in out


def test_publication_handles_unexpandable_old_specs() -> None:
    have = planning.Published(lines={"gone": "abc|latest|0|allow|1|0"},
                                 specs={"gone": '{"cron": "not a cron"}'},
                                 watermarks={"gone": "5"}, lowest={"default": 1})
    changes = planning.diff({}, have, now_ms=10, horizon_ms=10)
    assert changes.removals == [("gone", "abc")] and changes.fires == 0


def test_intervals_bounds_and_jobs_without_a_schedule(tmp_path: Path, r: redis.Redis,
                                                       clock: FixedClock) -> None:
    cfg = write(tmp_path / "s.yaml", """
jobs:
  ninety:
    every: 90m
    command: ["true"]
  three:
    every: 10m
    start: 2030-01-01T00:00:00Z
    max_runs: 3
    command: ["true"]
  manual:
    command: ["true"]
""")
    p = make(cfg, r, clock)
    p.tick()
    # ninety: every 90 minutes from the epoch; three: 00:00 (before now, not planned),
    # 00:10 and 00:20, then no more; manual: published, with no fire ever planned.
    assert queued(r, "ninety") == expected(cfg, "ninety", T0, T0 + 2 * HOUR)
    assert [parse_fire(f)[1] for f in queued(r, "ninety")] == [
        dt_to_ms(datetime(2030, 1, 1, 1, 30, tzinfo=UTC))]
    assert queued(r, "three") == [fire_id("three", T0 - 30_000 + m * 60_000) for m in (10, 20)]
    assert queued(r, "manual") == []
    assert set(r.hkeys(K.jobs)) == {"ninety", "three", "manual"}
    assert json.loads(r.hget(K.specs, "ninety")) == {
        "cron": None, "timezone": "UTC", "jitter": 0.0, "every_ms": 90 * 60_000}
    clock.advance(5 * HOUR)
    p.tick()  # three has run its course; ninety keeps going
    assert queued(r, "three") == [fire_id("three", T0 - 30_000 + m * 60_000) for m in (10, 20)]
    assert len(queued(r, "ninety")) == len(expected(cfg, "ninety", T0, T0 + 7 * HOUR)) == 4
    # Changing the interval replans, like changing a cron expression.
    write(cfg, cfg.read_text().replace("every: 90m", "every: 2h"))
    p.tick()
    assert queued(r, "ninety") == expected(cfg, "ninety", clock.now_ms(),
                                           clock.now_ms() + 2 * HOUR)


def test_a_watermark_that_is_no_time_plans_from_now_and_the_others_plan_on(
        cfg: Path, r: redis.Redis, clock: FixedClock, caplog: pytest.LogCaptureFixture) -> None:
    """Written by hand: the tick used to fail on it, and no job of the shard was planned."""
    p = make(cfg, r, clock)
    p.tick()
    r.delete(K.queue)
    r.hset(K.watermarks, "every5", "abc")
    clock.advance(60_000)
    with caplog.at_level(logging.WARNING, logger="cronsvc.planner"):
        stats = p.tick()
    assert "cron:planned 'every5': 'abc' is not a time" in caplog.text
    now, upto = T0 + 60_000, T0 + 60_000 + int(p.horizon * 1000)
    assert queued(r, "every5") == expected(cfg, "every5", now, upto)
    assert int(r.hget(K.watermarks, "every5")) == upto and stats.added > 0
