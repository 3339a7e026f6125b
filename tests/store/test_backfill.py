"""The record of runs (ack, fail) and lua/backfill-6+.lua, against a real Redis."""

from __future__ import annotations

import time

import pytest
import redis

from cronsvc.fires import fire_id, host_fire
from cronsvc.keys import Keys
from cronsvc.ran import PERIOD_MS, REACH_MS, RanEntries, decode, period_of, ran_entry
from cronsvc.store.scripts import Scripts
from tests.store.test_scripts import D1, MIN, SPEC, K, line

# An hour into the record period of now: records written for fires due then outlive the test
# (a record period long gone expires at once).
T0 = (period_of(int(time.time() * 1000)) * PERIOD_MS // MIN + 60) * MIN


def minutes(*ns: int) -> list[int]:
    return [T0 + n * MIN for n in ns]


def setup_job(s: Scripts, dues: tuple[int, ...] = (1, 2, 3), **policy: object) -> None:
    s.publish(K, [("a", "-", line(**policy), SPEC)],  # type: ignore[arg-type]
              generation=1, now_ms=T0)
    s.plan(K, [("a", D1, T0 + 100 * MIN, minutes(*dues))])


@pytest.fixture
def s(r: redis.Redis) -> Scripts:
    return Scripts(r)


def ran(redis_url: str, owner: str, due: int) -> set[int]:
    """The due times of ``owner``'s record of runs in the period of ``due``."""
    with redis.Redis.from_url(redis_url) as raw:
        return decode(raw.get(K.ran(owner, period_of(due))), period_of(due))


def test_the_record_holds_the_fires_that_ran_and_no_others(s: Scripts, r: redis.Redis,
                                                          redis_url: str) -> None:
    setup_job(s, dues=(1, 2, 3), attempts=1)
    s.enqueue(K, "a@5#tqqqqqq", T0 + MIN, None)
    claimed = s.claim(K, "w", batch=5, now_ms=T0 + 3 * MIN).claimed
    by_fire = {c.fire_id: c for c in claimed}
    ok, bad, oneoff = (by_fire[fire_id("a", T0 + MIN)], by_fire[fire_id("a", T0 + 2 * MIN)],
                       by_fire["a@5#tqqqqqq"])
    assert s.ack_many(K, [(ok.fire_id, ok.token, "a", {"status": "ok"}),
                          (oneoff.fire_id, oneoff.token, "a", {"status": "ok"})]) == [True, True]
    assert s.fail(K, bad.fire_id, bad.token, "a", {"status": "failed"}, 100, 1, 0,
                  now_ms=T0 + 3 * MIN).verdict == "dead"
    # The third fire is in flight: not recorded until it ends.
    assert ran(redis_url, "a", T0) == {T0 + MIN, T0 + 2 * MIN}
    assert ran_entry(K, "a@5#tqqqqqq") is None
    ttl = r.pttl(K.ran("a", period_of(T0)))
    assert 0 < ttl <= PERIOD_MS + REACH_MS


def test_a_schedule_fire_is_recorded_under_its_schedule(s: Scripts, r: redis.Redis,
                                                        redis_url: str) -> None:
    fid = fire_id("a", T0 + MIN, schedule="s-1")
    r.zadd(K.working, {fid: T0 + 2 * MIN})  # as a claim leaves it
    r.hset(K.attempts, fid, 1)
    s.ack(K, fid, 1, "a", {"status": "ok"})
    entry = ran_entry(K, fid)
    assert entry is not None and entry[0] == K.ran("!s-1", period_of(T0 + MIN))
    assert ran(redis_url, "!s-1", T0) == {T0 + MIN}
    assert ran(redis_url, "a", T0) == set()
    assert ran_entry(K, host_fire(fire_id("a", T0), "h1")) is None  # one host's run


@pytest.mark.parametrize("keys", [K, Keys(prefix="p:", shard=3)])
def test_the_entries_of_an_ack_s_fires_are_each_fire_s_own(keys: Keys) -> None:
    entries = RanEntries(keys)
    fires = [(fire_id(job, due), job) for job in ("a", "ab", "a.b-c")
             for due in (T0, T0 + MIN, T0 + PERIOD_MS, 0, PERIOD_MS - 1)]
    fires += [
        (fire_id("a", T0, schedule="s-1"), "a"), (fire_id("a", T0, "tq"), "a"),
        (host_fire(fire_id("a", T0), "h1"), "a"), (host_fire(fire_id("a", T0, schedule="s"), "h"),
                                                   "a"),
        (fire_id("ab", T0), "a"), (fire_id("a", T0), "ab"), (fire_id("a", T0), "other"),
    ]
    for fid, job in fires * 2:  # the second time, from what it remembers
        assert entries.entry(fid, job) == ran_entry(keys, fid), fid


def test_backfill_queues_only_the_fires_that_did_not_run(s: Scripts, r: redis.Redis) -> None:
    setup_job(s, dues=(1, 2, 3, 4), attempts=1)
    fires = [fire_id("a", d) for d in minutes(1, 2, 3, 4, 5, 6)]
    got = {c.fire_id: c for c in s.claim(K, "w", batch=3, now_ms=T0 + 4 * MIN).claimed}
    first, second = got[fires[0]], got[fires[1]]
    s.ack(K, first.fire_id, first.token, "a", {"status": "ok"})
    s.fail(K, second.fire_id, second.token, "a", {"status": "failed"}, 100, 1, 0,
           now_ms=T0 + 4 * MIN)
    r.delete(K.dead)  # a dead fire purged stays in the record
    # 1 ran, 2 died, 3 in flight, 4 queued, 5 and 6 never planned (an outage)
    look = s.backfill(K, "a", "a", fires, queue=False)
    assert look == ["ran", "ran", "in flight", "queued already", "to run", "to run"]
    assert r.zcard(K.queue) == 1  # looking changes nothing
    line = {"fire": fires[4], "job": "a", "status": "backfill", "reason": "by ann"}
    assert s.backfill(K, "a", "a", fires, queue=True, line=line) == [
        "ran", "ran", "in flight", "queued already", "queued", "queued"]
    assert r.hmget(K.attempts, fires[4:]) == ["0", "0"]
    assert r.zscore(K.queue, fires[5]) == T0 + 6 * MIN
    assert '"status":"backfill"' in r.lindex(K.history("a"), 0)
    again = s.backfill(K, "a", "a", fires, queue=True, line=line)
    assert again[4:] == ["queued already", "queued already"]
    assert r.llen(K.history("a")) == 4  # ok; failed and dead; one backfill line, not two
    assert '"status":"backfill"' in r.lindex(K.history("a"), 0)


def test_a_backfilled_fire_is_not_judged_late(s: Scripts, r: redis.Redis) -> None:
    # catch_up latest with a newer fire queued, and a starting deadline long past
    setup_job(s, dues=(50,), catch_up="latest", deadline=30_000)
    old = fire_id("a", T0 + MIN)
    assert s.backfill(K, "a", "a", [old], queue=True) == ["queued"]
    res = s.claim(K, "w", batch=5, now_ms=T0 + 50 * MIN + 10_000)
    assert [c.fire_id for c in res.claimed] == [old, fire_id("a", T0 + 50 * MIN)]
    assert res.claimed[0].token == 1 and res.dropped == []


def test_a_backfilled_fire_waits_for_a_run_in_its_way(s: Scripts, r: redis.Redis) -> None:
    for overlap in ("forbid", "replace"):
        r.flushdb()
        setup_job(s, dues=(10,), overlap=overlap)
        running = s.claim(K, "w", batch=1, lease_ms=10 * MIN, now_ms=T0 + 10 * MIN).claimed[0]
        old = fire_id("a", T0 + MIN)
        s.backfill(K, "a", "a", [old], queue=True)
        res = s.claim(K, "w", batch=1, now_ms=T0 + 11 * MIN)
        assert (res.claimed, res.dropped) == ([], []), overlap
        assert r.zscore(K.queue, old) is not None and not r.hexists(K.cancels, running.fire_id)
        s.ack(K, running.fire_id, running.token, "a", {"status": "ok"})
        assert [c.fire_id for c in s.claim(K, "w", batch=1, now_ms=T0 + 12 * MIN).claimed] == [old]


@pytest.mark.parametrize("others", [0, 40], ids=["few fires: the string searched",
                                                 "many: a set built"])
def test_the_record_is_read_entry_by_entry(s: Scripts, redis_url: str, others: int) -> None:
    # Entries 00000001 and 02000000 hold the bytes 00 01 02 00 across their boundary: the
    # entry of a fire that did not run, which must not be taken for one that did.
    start = period_of(T0) * PERIOD_MS
    with redis.Redis.from_url(redis_url) as raw:
        raw.set(K.ran("a", period_of(T0)), bytes.fromhex("0000000102000000"))
    fires = [fire_id("a", start + d) for d in (1, 0x00010200, 0x02000000)]
    fires += [fire_id("a", start + 60_000 * (n + 1)) for n in range(others)]
    assert s.backfill(K, "a", "a", fires, queue=False) == (
        ["ran", "to run", "ran"] + ["to run"] * others)
