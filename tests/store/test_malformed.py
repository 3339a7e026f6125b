"""What Redis holds that is not what its key holds: the scripts that keep a key in order set
it aside once, into the shard's list of them, and every other fire goes on."""

from __future__ import annotations

import json

import pytest
import redis

from cronsvc.fires import fire_id, is_fire_id
from cronsvc.keys import Keys
from cronsvc.malformed import parse
from cronsvc.store.connection import connect
from cronsvc.store.loader import INCLUDES, expand_includes, lua_dir
from cronsvc.store.scripts import Scripts
from tests.chaos.garbage import bad_fire_ids
from tests.store.test_scripts import D1, MIN, T0, minutes, setup_job

K = Keys()
WELL_FORMED = ["a@1", "a.b-c_d@1795572000000", "a@1#tabc234", "a@1!digest:user-42/x",
               "a@1!@host-1.lan", "a@1#tabc!@h", "a@1!s:1!@h", "A9@999999999999999"]
NOT_FIRE_IDS = ["", "a", "a@", "@1", "a@x", "a@1#", "a@1!", "a@1!@", "a@1 ", " a@1", "a@1\n",
                "a@1\nx", "a@-1", "a@1.5", "a@1#x#y", "a@1!a|b", "a b@1", "-a@1", "a@1\x1b[2J",
                "a@1234567890123456", "a@99999999999999999999999", "\u00e9@1", "a@1!@h!s",
                "a@1!@h#t", "a@1!@", "a@1#t!@h/x"]


@pytest.fixture
def r(redis_url: str) -> redis.Redis:
    return connect(redis_url)  # as the fleet reads: what is not UTF-8 arrives replaced


@pytest.fixture
def s(r: redis.Redis) -> Scripts:
    return Scripts(r)


@pytest.fixture
def raw(redis_url: str) -> redis.Redis:
    return redis.Redis.from_url(redis_url)  # bytes in and out, as written by hand


def aside(r: redis.Redis) -> list[tuple[str, str, str]]:
    return [(e.key, e.member, e.why) for e in map(parse, r.lrange(K.malformed, 0, -1))]


def test_lua_and_python_read_the_grammar_of_fire_ids_alike(s: Scripts, r: redis.Redis) -> None:
    check = r.register_script(expand_includes(
        "-- @include fires.lua\nlocal out = {}\nfor i, f in ipairs(ARGV) do "
        "out[i] = well_formed(f) and 1 or 0 end\nreturn out", lua_dir() / INCLUDES, lua_dir()))
    ids = WELL_FORMED + NOT_FIRE_IDS
    assert check(args=ids) == [int(is_fire_id(f)) for f in ids]
    assert [is_fire_id(f) for f in ids] == [True] * len(WELL_FORMED) + [False] * len(
        NOT_FIRE_IDS)


def test_a_member_that_is_not_a_fire_id_is_set_aside_once_and_the_fires_run(
        s: Scripts, r: redis.Redis, raw: redis.Redis) -> None:
    setup_job(s, "a", (1, 2))
    now = T0 + 3 * MIN
    bad = bad_fire_ids(T0)
    raw.zadd(K.queue, dict.fromkeys(bad, T0))  # due before the fires: examined first
    raw.zadd(K.queue, {b"late@x": "-inf"})  # -inf is due, not "nothing queued"
    raw.hset(K.attempts, mapping=dict.fromkeys(bad[:3], "abc"))
    res = s.claim(K, "w", batch=2, scan_limit=len(bad) + 10, now_ms=now)
    assert [c.fire_id for c in res.claimed] == [fire_id("a", d) for d in minutes(1, 2)]
    members = [m.decode(errors="replace") for m in (b"late@x", *bad)]
    assert sorted(m for m, _ in res.aside) == sorted(members)
    assert {key for _, key in res.aside} == {K.queue}
    assert raw.zrange(K.queue, 0, -1) == [] and not raw.hmget(K.attempts, bad[:3])[0]
    assert sorted(m for _, m, _ in aside(r)) == sorted(members)
    assert {(key, why) for key, _, why in aside(r)} == {(K.queue, "not a fire id")}
    # Set aside once: nothing is left to find.
    assert s.claim(K, "w", batch=2, now_ms=now).aside == [] and len(aside(r)) == len(members)
    events = [json.loads(e) for e in r.lrange(K.events, 0, -1)]
    assert not any("marker" in str(e.get("fire")) for e in events)


def test_a_lapsed_lease_of_a_member_that_is_not_a_fire_id_is_set_aside(
        s: Scripts, r: redis.Redis, raw: redis.Redis) -> None:
    setup_job(s, "a", (1,))
    raw.zadd(K.working, {b"marker": T0, b"@" + str(T0).encode(): T0})
    raw.hset(K.claims, b"marker", b"{not json")
    res = s.claim(K, "w", batch=5, now_ms=T0 + 2 * MIN)
    assert [c.fire_id for c in res.claimed] == [fire_id("a", T0 + MIN)]
    assert sorted(res.aside) == [(f"@{T0}", K.working), ("marker", K.working)]
    assert raw.zrange(K.working, 0, -1) == [fire_id("a", T0 + MIN).encode()]
    assert raw.hget(K.claims, b"marker") is None


def test_a_payload_that_is_not_json_fails_its_fire_instead_of_the_claim(
        s: Scripts, r: redis.Redis) -> None:
    setup_job(s, "a", ())
    fid = fire_id("a", T0, "tabcdef")
    s.enqueue(K, fid, T0, {"x": 1})
    r.hset(K.payloads, fid, "{not json")
    [claim] = s.claim(K, "w", batch=5, now_ms=T0 + 1).claimed
    assert claim.fire_id == fid and claim.payload is None
    assert claim.unreadable == f"{K.payloads} '{fid}': its payload is not JSON: '{{not json'"


def test_a_stored_claim_that_is_not_json_is_no_holder(s: Scripts, r: redis.Redis) -> None:
    setup_job(s, "a", (1,))
    [first] = s.claim(K, "w1", batch=1, lease_ms=1000, now_ms=T0 + MIN).claimed
    r.hset(K.claims, first.fire_id, "[not json")
    [again] = s.claim(K, "w2", batch=1, lease_ms=1000, now_ms=T0 + MIN + 1000).claimed
    assert (again.fire_id, again.token, again.reclaimed, again.before) == (
        first.fire_id, 2, True, None)


def test_schedules_that_do_not_read_are_set_aside_by_the_read_of_the_due_ones(
        s: Scripts, r: redis.Redis, raw: redis.Redis) -> None:
    good = "1|1|1|cli|a|0||||{\"every_ms\":1000,\"anchor_ms\":0}|"
    raw.hset(K.schedules, mapping={"good": good, "bad:1": "garbage line", "bad:2": b"\xff"})
    raw.zadd(K.schedule_marks, {"good": 5, "bad:1": 0, "bad:2": 0, "orphan": 0, b"\xff": 0,
                                "minus": "-inf"})
    raw.hset(K.schedules, "minus", good)
    due, set_aside = s.schedule_due(K, upto=T0, offset=0, page=100)
    assert sorted(due) == [("good", 5, good), ("minus", 0, good)] and set_aside == 4
    assert sorted(aside(r)) == [
        (K.schedule_marks, "orphan", "a mark of no schedule"),
        (K.schedule_marks, "\ufffd", "not a schedule id"),
        (K.schedules, "bad:1", "not a stored schedule"),
        (K.schedules, "bad:2", "not a stored schedule"),
    ]
    assert sorted(raw.hkeys(K.schedules)) == [b"good", b"minus"]
    assert sorted(raw.zrange(K.schedule_marks, 0, -1)) == [b"good", b"minus"]
    [entry] = [e for e in map(parse, r.lrange(K.malformed, 0, -1)) if e.member == "bad:1"]
    assert entry.value == "garbage line"
    # A line the planner cannot read: set aside by its rev, unless it changed meanwhile.
    assert not s.schedule_aside(K, "good", "2", "its cron is 'x'")
    assert s.schedule_aside(K, "good", "1", "its cron is 'x'")
    assert raw.hget(K.schedules, "good") is None and raw.zscore(K.schedule_marks, "good") is None
    assert aside(r)[0] == (K.schedules, "good", "its cron is 'x'")


def test_an_entry_of_the_list_that_is_not_one_still_reads(r: redis.Redis) -> None:
    r.lpush(K.malformed, "garbage", '{"key": "k", "member": "m", "why": "w", "at": 5}')
    assert [(e.key, e.member, e.why, e.at_ms) for e in map(parse, r.lrange(K.malformed, 0, -1))
            ] == [("k", "m", "w", 5), ("?", "garbage", "not an entry of this list", 0)]


def test_a_hand_written_limit_of_zero_bounds_nothing(s: Scripts, r: redis.Redis) -> None:
    """A planner never writes it (the file refuses caps below 1): a fire waiting behind no
    run at all made every claim fail while it was due."""
    setup_job(s, "a", ())
    r.hset(K.jobs, "a", f"{D1}|all|0|queue|3|0|||||gpu:0")
    fid = fire_id("a", T0, "tabcdef")
    s.enqueue(K, fid, T0)
    assert [c.fire_id for c in s.claim(K, "w", batch=5, now_ms=T0 + 1).claimed] == [fid]
