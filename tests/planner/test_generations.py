"""Planners on different job files agree on one: the newest published generation wins.

Pure tables for :mod:`cronsvc.planner.generations`, then planners in this process on one real
Redis, sharing one clock, as a rolling deploy runs them.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

import pytest
import redis
from click.testing import CliRunner

from cronsvc.cli.main import main
from cronsvc.client.client import Client
from cronsvc.clock import FixedClock
from cronsvc.config.models import load_config
from cronsvc.fires import fire_id, parse_fire
from cronsvc.keys import Keys
from cronsvc.planner import publish
from cronsvc.planner.generations import Disagreement, Newest, Verdict, compare, decide
from cronsvc.planner.planner import Planner
from cronsvc.planner.publish import policy_line
from cronsvc.presence import planner_stale_ms
from cronsvc.schedule.expand import occurrences_ms

K = Keys()
HORIZON_S = 600
TICK_S = 60.0  # the default tick of the files below: planners are stale after 130 s

OLD = """
jobs:
  same:
    cron: "* * * * *"
    command: ["true"]
  changed:
    cron: "*/2 * * * *"
    command: ["true"]
  only_old:
    cron: "*/4 * * * *"
    command: ["true"]
"""
NEW = """
jobs:
  same:
    cron: "* * * * *"
    command: ["true"]
  changed:
    cron: "*/3 * * * *"
    command: ["true"]
  only_new:
    cron: "*/5 * * * *"
    command: ["true"]
"""


# -- decide and compare: pure ----------------------------------------------------------------
SEEN = Newest(gen=4, digest="theirs", planner="p1", at_ms=1000, jobs=3)


@pytest.mark.parametrize(("newest", "published_as", "changed", "held", "verdict"), [
    (Newest(4, "mine"), 4, False, True, Verdict.CURRENT),  # ours is the newest
    (Newest(4, "mine"), 4, True, True, Verdict.CURRENT),  # an edit that is already newest
    (Newest(), None, False, False, Verdict.PUBLISH),  # nothing published yet
    (Newest(), 2, False, True, Verdict.PUBLISH),  # wiped: publish again
    (SEEN, None, False, True, Verdict.PUBLISH),  # a new file (a deploy) wins
    (SEEN, 2, True, True, Verdict.PUBLISH),  # our file changed under us: it is newer
    (SEEN, 2, False, False, Verdict.PUBLISH),  # the newer file's planners are gone
    (SEEN, 2, False, True, Verdict.YIELD),  # replaced, and its planners live: yield
    (SEEN, 5, False, True, Verdict.YIELD),  # a forced rollback published after us
])
def test_decide(newest: Newest, published_as: int | None, changed: bool, held: bool,
                verdict: Verdict) -> None:
    assert decide("mine", newest, published_as=published_as, changed=changed,
                  newest_held=held) is verdict


@pytest.mark.parametrize(("mine", "published", "expected", "summary"), [
    ({}, {}, Disagreement(), "0 jobs alike"),
    ({"a": "1", "b": "2"}, {"a": "1", "b": "2"}, Disagreement(alike=2), "2 jobs alike"),
    ({"a": "1", "n": "2"}, {"a": "1"}, Disagreement(only_here=["n"], alike=1),
     "1 job alike; only in this file: n"),
    ({"a": "1"}, {"a": "1", "p": "2", "o": "3"},
     Disagreement(only_published=["o", "p"], alike=1),
     "1 job alike; only in the published file: o, p"),
    ({"a": "1", "c": "x"}, {"a": "1", "c": "y"}, Disagreement(different=["c"], alike=1),
     "1 job alike; defined differently: c"),
    ({"c": "x", "n": "1"}, {"c": "y", "p": "1"},
     Disagreement(only_here=["n"], only_published=["p"], different=["c"], alike=0),
     "0 jobs alike; only in this file: n; only in the published file: p; "
     "defined differently: c"),
])
def test_compare(mine: dict[str, str], published: dict[str, str], expected: Disagreement,
                 summary: str) -> None:
    found = compare(mine, published)
    assert found == expected
    assert found.summary() == summary
    assert bool(found) is (expected != Disagreement(alike=expected.alike))


# -- planners on one Redis ---------------------------------------------------------------------
def write(path: Path, text: str) -> Path:
    """Write the file so that its mtime or size surely changes."""
    before = path.stat().st_mtime_ns if path.exists() else 0
    path.write_text(text)
    os.utime(path, ns=(before + 10**9, before + 10**9))
    return path


def server_ms(r: redis.Redis) -> int:
    sec, usec = r.time()
    return int(sec) * 1000 + int(usec) // 1000


def queued(r: redis.Redis, job: str) -> list[str]:
    return [str(f) for f in r.zrange(K.queue, 0, -1) if str(f).startswith(job + "@")]


def expected(cfg: Path, job: str, start: int, end: int) -> list[str]:
    spec = load_config(cfg).jobs[job]
    return [fire_id(job, due) for due in occurrences_ms(spec, start, end)]


def lines_of(cfg: Path) -> dict[str, str]:
    return {name: policy_line(job) for name, job in load_config(cfg).jobs.items()}


def records(r: redis.Redis, job: str) -> list[dict[str, object]]:
    """The job's history, oldest first."""
    return [json.loads(x) for x in reversed(r.lrange(K.history(job), 0, -1))]


def state(r: redis.Redis) -> tuple[object, ...]:
    """Everything a publish may change."""
    return (r.zrange(K.queue, 0, -1, withscores=True), r.hgetall(K.jobs), r.hgetall(K.specs),
            r.hgetall(K.watermarks), r.lrange(K.events, 0, -1),
            {job: r.lrange(K.history(job), 0, -1) for job in ("same", "changed", "only_new")})


@pytest.fixture
def files(tmp_path: Path) -> tuple[Path, Path]:
    return write(tmp_path / "old.yaml", OLD), write(tmp_path / "new.yaml", NEW)


def test_a_planner_on_a_replaced_file_yields_until_the_newer_planners_are_gone(
        files: tuple[Path, Path], r: redis.Redis, redis_url: str,
        caplog: pytest.LogCaptureFixture) -> None:
    old, new = files
    # One clock for every planner, on the server's time, so `status` sees them live.
    clock = FixedClock(server_ms(r) // 60_000 * 60_000 + 30_000)
    t0 = clock.now_ms()

    def planner(cfg: Path, pid: str) -> Planner:
        return Planner(cfg, r, planner_id=pid, clock=clock, horizon=HORIZON_S)

    assert planner(old, "b").tick().verdict == "publish"  # the old file, generation 1
    a = planner(new, "a")
    assert a.tick().verdict == "publish"  # a deploy: a file never published wins
    assert r.hget(K.generation, "gen") == "2" and a.generation == 2
    assert r.hgetall(K.jobs) == lines_of(new)
    # What the publish unqueued is in the history of its jobs, with the reason.
    assert [(x["status"], x["reason"], x["generation"], x["fires"])
            for x in records(r, "only_old")] == [
        ("removed", "removed: job deleted from the file", 2,
         len(expected(old, "only_old", t0, t0 + HORIZON_S * 1000)))]
    assert [(x["status"], x["reason"], x["generation"]) for x in records(r, "changed")] == [
        ("replaced", "replaced: definition changed", 2)]
    assert queued(r, "changed") == expected(new, "changed", t0, t0 + HORIZON_S * 1000)
    before = state(r)

    # B restarts on the old file, which was published before: it yields, tick after tick.
    b = planner(old, "b")
    with caplog.at_level(logging.WARNING, logger="cronsvc.planner"):
        assert [b.tick().verdict for _ in range(2)] == ["yield", "yield"]
    said = [m for m in caplog.messages if "is not the published job file" in m]
    assert len(said) == 2, caplog.messages
    assert ("1 job alike; only in this file: only_old; only in the published file: only_new; "
            "defined differently: changed") in said[0]
    assert "generation 2, from a" in said[0]
    assert state(r) == before  # nothing of A's removed, unqueued or overwritten
    assert b.generation is None and r.get(K.published) == "2"

    # It plans the jobs both files define alike, and only those.
    clock.advance(100_000)  # A's publish is still recent: A counts as live
    stats = b.tick()
    assert (stats.verdict, stats.stale) == ("yield", 1)  # `changed` refused: another schedule
    assert queued(r, "same") == expected(new, "same", t0, clock.now_ms() + HORIZON_S * 1000)
    assert queued(r, "changed") == expected(new, "changed", t0, t0 + HORIZON_S * 1000)
    assert queued(r, "only_old") == []

    # status names the disagreement.
    status = Client(redis_url).status()
    assert status.generation is not None and status.generation["gen"] == "2"
    assert "planners hold 2 different job files: b yield to generation 2 (from a)" \
        in status.warnings, status.warnings

    # A keeps ticking: B keeps yielding, long after A's publish.
    clock.advance(planner_stale_ms(TICK_S) + 1000)
    assert a.tick().verdict == "current"
    assert b.tick().verdict == "yield"
    # A dies without a word: B yields while A's heartbeat is recent, then publishes.
    clock.advance(planner_stale_ms(TICK_S))
    assert b.tick().verdict == "yield"
    clock.advance(2000)
    assert b.tick().verdict == "publish"
    assert r.hget(K.generation, "gen") == "3" and r.hgetall(K.jobs) == lines_of(old)
    assert [(x["status"], x["reason"], x["generation"]) for x in records(r, "only_new")] == [
        ("removed", "removed: job deleted from the file", 3)]
    assert [(x["status"], x["generation"]) for x in records(r, "changed")] == [
        ("replaced", 2), ("replaced", 3)]
    assert queued(r, "only_new") == []
    # A back on the new file (published before, as generation 2) now yields to B.
    assert planner(new, "a").tick().verdict == "yield"
    assert r.hgetall(K.jobs) == lines_of(old)


def test_cronsvc_publish_forces_a_file_and_the_planners_yield_to_it(
        files: tuple[Path, Path], r: redis.Redis, redis_url: str) -> None:
    old, new = files
    a = Planner(new, r, planner_id="a", horizon=HORIZON_S)  # the server's clock
    assert a.tick().verdict == "publish"
    result = CliRunner().invoke(main, ["publish", str(old), "--redis-url", redis_url])
    assert result.exit_code == 0, result.output
    assert f"published {old} as generation 2 (3 jobs)" in result.output
    assert r.hgetall(K.jobs) == lines_of(old)
    assert [x["reason"] for x in records(r, "only_new")] == ["removed: job deleted from the file"]
    # A's file was published before and is no longer the newest: it leaves the rollback be.
    assert a.tick().verdict == "yield"
    assert r.hgetall(K.jobs) == lines_of(old) and queued(r, "only_new") == []
    # The client's call forces a file the same way, even over a live planner's newer one.
    assert Client(redis_url, config=str(new)).publish_config() == 3
    assert r.hgetall(K.jobs) == lines_of(new)
    # The newest file forced again is no new generation.
    assert Client(redis_url, config=str(new)).publish_config() == 3
    assert a.tick().verdict == "current"
    # A file edited under its planner is newer than anything published: it wins.
    write(new, NEW.replace("*/5 * * * *", "*/6 * * * *"))
    Client(redis_url, config=str(old)).publish_config()
    assert a.tick().verdict == "publish"
    assert r.hget(K.generation, "gen") == "5" and r.hgetall(K.jobs) == lines_of(new)


def test_every_fire_a_publish_unqueues_is_in_its_jobs_history(
        tmp_path: Path, r: redis.Redis, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(publish, "MAX_FIRES_PER_CALL", 7)  # many calls per publish
    cfg = write(tmp_path / "m.yaml", "jobs:\n" + "".join(
        f'  {name}:\n    cron: "{cron}"\n    command: ["true"]\n'
        for name, cron in (("kept", "*/5 * * * *"), ("edited", "* * * * *"),
                           ("dropped", "*/2 * * * *"))))
    clock = FixedClock(1_900_000_000_000)
    p = Planner(cfg, r, planner_id="p", clock=clock, horizon=3600)
    p.tick()
    clock.advance(10 * 60_000)  # some are due now, not run: they go too
    before = {job: queued(r, job) for job in ("kept", "edited", "dropped")}
    write(cfg, cfg.read_text().replace('"* * * * *"', '"30 */7 * * * *"')
          .split("  dropped:")[0])
    p.tick()
    assert queued(r, "kept")[:len(before["kept"])] == before["kept"]
    assert queued(r, "dropped") == []
    assert not set(before["edited"]) & set(queued(r, "edited"))
    assert records(r, "kept") == []
    for job, why, reason in (("edited", "replaced", "replaced: definition changed"),
                             ("dropped", "removed", "removed: job deleted from the file")):
        found = records(r, job)
        assert {(x["status"], x["reason"]) for x in found} == {(why, reason)}
        assert len(found) > 1  # one line per call: the unqueueing took several
        # Every fire that left the queue is counted once, and the lines span them all.
        assert sum(int(x["fires"]) for x in found) == len(before[job])  # type: ignore[call-overload]
        dues = [parse_fire(f)[1] for f in before[job]]
        assert min(int(x["first"]) for x in found) == dues[0]  # type: ignore[call-overload]
        assert max(int(x["last"]) for x in found) == dues[-1]  # type: ignore[call-overload]
