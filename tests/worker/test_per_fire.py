"""What a worker makes per fire, made only when a fire needs it: a run's live feed joins
the feeds written at its first chunk (and never once its run is over), the outcomes of
dispatched fires are asked of one object per shard, a run knows whether it starts
processes."""

from __future__ import annotations

import dataclasses
import threading
from pathlib import Path

import redis

from cronsvc.config.models import load_config
from cronsvc.fires import schedule_of
from cronsvc.keys import Keys
from cronsvc.kinds.call import _result
from cronsvc.run.calls import NOTHING, returned
from cronsvc.run.context import FireContext
from cronsvc.run.flag import Flag
from cronsvc.run.outcome import Result
from cronsvc.run.output import Kept
from cronsvc.store.connection import connect
from cronsvc.store.scripts import Claim, _claims
from cronsvc.worker.live import LiveKept, LiveOutput
from cronsvc.worker.running import Running
from cronsvc.worker.worker import Worker
from tests.support.calls import nothing
from tests.support.wait import wait_for

K = Keys()


def _one_call_worker(tmp_path: Path, redis_url: str) -> Worker:
    """A worker (not started) of one no-op call job, ``fn``, with id ``w``."""
    cfg = tmp_path / "jobs.yaml"
    cfg.write_text("jobs:\n  fn:\n    cron: '0 0 1 1 *'\n    call: tests.support.calls:nothing\n")
    return Worker(load_config(cfg), connect(redis_url), worker_id="w")


def test_a_feed_closed_before_any_output_never_joins(r: redis.Redis) -> None:
    live = LiveOutput(r, lambda: 60_000)
    feed = live.open(K, "job@1", 1)
    live.close(feed)
    feed.add(b"printed by a thread the call left behind\n")
    assert not live._feeds
    assert feed.key == ""


def test_a_feed_joins_at_its_first_chunk_once_and_leaves_at_its_close(r: redis.Redis) -> None:
    live = LiveOutput(r, lambda: 60_000)
    feed = live.open(K, "job@1", 3)
    feed.add(b"one\n")
    feed.add(b"two\n")
    assert live._feeds == {feed}
    assert feed.key == K.live("job@1")
    live.start()
    try:
        wait_for(lambda: r.exists(K.live("job@1")), 10, message="streamed")
        live.close(feed)
    finally:
        live.stop()
    assert not live._feeds
    entries = [fields for _, fields in r.xrange(K.live("job@1"))]
    assert entries[-1] == {"attempt": "3", "end": "1"}
    assert "".join(e.get("text", "") for e in entries) == "one\ntwo\n"


def test_a_keeper_opens_its_live_feed_at_its_first_chunk_and_none_once_closed(
        r: redis.Redis) -> None:
    live = LiveOutput(r, lambda: 60_000)
    run = Running(Claim("job@1", "job", 4, 1000), None, K, procs=False)  # type: ignore[arg-type]
    quiet = LiveKept(256, live, run, 12.5)
    quiet.closed()
    quiet.add(b"printed by a thread the call left behind\n")
    assert quiet.feed is None and not live._feeds
    assert quiet.text() == "printed by a thread the call left behind\n"  # kept all the same

    loud = LiveKept(256, live, run, 12.5)
    loud.add(b"one\n")
    loud.add(b"two\n")
    feed = loud.feed
    assert feed is not None and live._feeds == {feed}
    assert (feed.key, feed.fire_id, feed.attempt, feed.since) == (K.live("job@1"), "job@1", 4, 12.5)
    live.start()
    try:
        wait_for(lambda: r.exists(K.live("job@1")), 10, message="streamed")
        loud.closed()
    finally:
        live.stop()
    assert not live._feeds
    loud.add(b"after its end\n")
    assert loud.feed is feed and not live._feeds
    entries = [fields for _, fields in r.xrange(K.live("job@1"))]
    assert entries[-1] == {"attempt": "4", "end": "1"}
    assert "".join(e.get("text", "") for e in entries) == "one\ntwo\n"
    assert loud.text() == "one\ntwo\nafter its end\n"


def test_a_call_that_printed_nothing_and_returned_none_reports_ok_and_nothing() -> None:
    assert returned(None, Kept()) is NOTHING
    assert _result(NOTHING) == Result("ok")
    printed = Kept()
    printed.write("hello\n")
    assert returned(None, printed).output == "hello\n"
    assert returned(42, Kept()).output == "42"


def test_a_keeper_counts_what_it_left_out_only_once_it_kept_something() -> None:
    kept = Kept(cap=4)
    assert kept.left_out == 0
    kept.write("abcdefgh")
    assert kept.left_out == 4
    assert "4 bytes left out" in kept.text()


def test_runs_know_whether_their_kind_starts_processes(tmp_path: Path) -> None:
    cfg = tmp_path / "jobs.yaml"
    cfg.write_text("jobs:\n"
                   "  cmd:\n    cron: '0 0 1 1 *'\n    command: ['true']\n"
                   "  fn:\n    cron: '0 0 1 1 *'\n    call: tests.support.calls:nothing\n")
    jobs = load_config(cfg).jobs
    assert Running(Claim("cmd@1", "cmd", 1, 0), jobs["cmd"], K).procs
    assert not Running(Claim("fn@1", "fn", 1, 0), jobs["fn"], K).procs


def test_the_outcomes_of_a_shard_are_one_object_per_keys(tmp_path: Path, redis_url: str
                                                          ) -> None:
    worker = _one_call_worker(tmp_path, redis_url)
    first = worker._deliveries(K)
    assert worker._deliveries(K) is first
    other = Keys(shard=1)
    assert worker._deliveries(other).keys is other
    assert worker._deliveries(Keys()).keys == K  # equal, not the same: its own


def test_claims_read_from_a_reply_are_the_claims_it_says() -> None:
    before = '{"worker": "a", "attempt": 1}'
    reply = [5, -1, 3,
             "job@1", 1, 100,
             "job@2", 2, 200,
             b"job@3", 3, 300,
             1, 2, '{"x": 1}',
             1, 2, before,
             0, 0]
    claims, after = _claims(K, reply, 3)
    assert after == len(reply) - 2
    assert claims == [Claim("job@1", "job", 1, 100),
                      Claim("job@2", "job", 2, 200, True, {"x": 1},
                            {"worker": "a", "attempt": 1}),
                      Claim("job@3", "job", 3, 300)]
    assert all(type(c) is Claim for c in claims)
    assert claims[0].unreadable is None and claims[0].payload is None


def test_a_flag_set_is_its_own_and_waits_like_an_event() -> None:
    first, second = Flag(), Flag()
    assert not first.is_set() and not first.wait(0)
    first.set()
    assert first.is_set() and first.wait(0)
    assert not second.is_set() and not second.wait(0.01)
    first.clear()
    assert not first.is_set()
    threading.Timer(0.05, second.set).start()
    assert second.wait(10)


def test_the_context_a_run_gets_is_the_one_its_init_would_make(
        tmp_path: Path, redis_url: str) -> None:
    worker = _one_call_worker(tmp_path, redis_url)
    job = worker.config.jobs["fn"]
    claim = Claim("fn@1!sched", "fn", 2, 1000, False, {"k": 1})
    ctx = worker._context(Running(claim, job, K))
    assert ctx == FireContext("fn", "fn@1!sched", 1000, 2, "w", {"k": 1},
                              schedule_of("fn@1!sched"), None)
    assert schedule_of("fn@1!sched") is not None
    # A fire of no runtime schedule, without a payload: those fields at their defaults.
    plain = worker._context(Running(Claim("fn@1", "fn", 3, 1000, False, None), job, K))
    made = FireContext("fn", "fn@1", 1000, 3, "w")
    assert plain == made
    assert dataclasses.asdict(plain) == dataclasses.asdict(made)
    assert repr(plain) == repr(made) and hash(plain) == hash(made)
    assert dataclasses.replace(plain, payload=1) == FireContext("fn", "fn@1", 1000, 3, "w", 1)


def test_a_reply_of_plain_fires_only_reads_as_each_fire_alone_would() -> None:
    # read column by column when no fire has a payload or a holder before: the same
    # claims as the reply's fires read one by one (the mixed reply above)
    reply = [5, -1, 3,
             "job@1", 1, "100",
             "other@2", 2, "200",
             "job@3", 3, 300,
             0,
             1, 2, "",
             0, 0]
    claims, after = _claims(K, reply, 3)
    assert claims == [Claim("job@1", "job", 1, 100), Claim("other@2", "other", 2, 200, True),
                      Claim("job@3", "job", 3, 300)]
    assert all(type(c) is Claim for c in claims)
    assert [type(c.token) for c in claims] == [int] * 3
    assert [type(c.due_ms) for c in claims] == [int] * 3
    assert [c.reclaimed for c in claims] == [False, True, False]
    # the same fires with nothing more: read column by column
    plain, after = _claims(K, [*reply[:12], 0, 0, 0, 0], 3)
    assert plain == [Claim("job@1", "job", 1, 100), Claim("other@2", "other", 2, 200),
                     Claim("job@3", "job", 3, 300)]
    assert all(type(c) is Claim for c in plain) and after == 14
    assert [type(c.token) for c in plain] == [int] * 3
    assert [type(c.due_ms) for c in plain] == [int] * 3
    assert _claims(K, [5, -1, 0, 0, 0, 0, 0], 0) == ([], 5)


def test_the_runs_a_claim_starts_are_as_their_init_would_make(
        tmp_path: Path, redis_url: str) -> None:
    worker = _one_call_worker(tmp_path, redis_url)
    job = worker.config.jobs["fn"]
    claim = Claim("fn@1", "fn", 2, 1000)
    handed: list[tuple[Running, ...]] = []
    worker._pool.submit_many = lambda fn, each: handed.extend(each)  # type: ignore[method-assign]
    worker._start(K, [claim], 5.0)
    [(run, fast)] = handed
    assert fast is not None and fast.fn is nothing  # an untimed sync call: _run_ready's
    made = Running(claim, job, K, 5.0, 5.0, False, worker.hooks.wanted(job), False, True)
    assert type(run) is Running and type(run.cancel) is Flag
    assert {k: v for k, v in vars(run).items() if k != "cancel"} == {
        k: v for k, v in vars(made).items() if k != "cancel"}
    assert list(vars(run)) == list(vars(made))  # the same fields, in the same order
    assert run in worker._running and worker._busy_n == 1
