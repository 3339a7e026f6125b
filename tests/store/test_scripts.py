"""Each Lua script's contract against a real Redis, with explicit ``now_ms``."""

from __future__ import annotations

import json
import re
import struct

import pytest
import redis

from cronsvc import history
from cronsvc.errors import LeaseLost, ScriptError, Superseded, UnknownJob
from cronsvc.fires import fire_id, new_tag, parse_fire
from cronsvc.history import record
from cronsvc.keys import ATTEMPTS_PIN, Keys
from cronsvc.ran import PERIOD_MS, REACH_MS, RanEntries, period_of
from cronsvc.run.output import OUTPUT_RETENTION_MS
from cronsvc.store.replies import record_json
from cronsvc.store.scripts import ACK_CHUNK, AckCall, Claim, Scripts, ack_call, load_sources

T0 = 1_763_830_000_000
MIN = 60_000
K = Keys()
D1, D2 = "d1d1d1d1d1d1", "d2d2d2d2d2d2"
SPEC = '{"cron":"* * * * *","timezone":"UTC","jitter":0}'


def line(digest: str = D1, catch_up: str = "all", deadline: int = 0, overlap: str = "allow",
         attempts: int = 3, paused: int = 0) -> str:
    return f"{digest}|{catch_up}|{deadline}|{overlap}|{attempts}|{paused}"


@pytest.fixture
def s(r: redis.Redis) -> Scripts:
    return Scripts(r)


def publish(s: Scripts, job: str = "a", expected: str = "-", now: int = T0, **policy: object):
    return s.publish(K, [(job, expected, line(**policy), SPEC)],  # type: ignore[arg-type]
                     generation=1, now_ms=now)


def minutes(*ns: int) -> list[int]:
    return [T0 + n * MIN for n in ns]


def queued(r: redis.Redis) -> list[str]:
    return r.zrange(K.queue, 0, -1)


def setup_job(s: Scripts, job: str = "a", dues: tuple[int, ...] = (1, 2, 3),
              **policy: object) -> None:
    publish(s, job, **policy)
    digest = str(policy.get("digest", D1))
    s.plan(K, [(job, digest, T0 + 10 * MIN, minutes(*dues))])


# -- fire ids ------------------------------------------------------------------------------
def test_fire_ids_round_trip() -> None:
    assert fire_id("a.b-c", T0) == f"a.b-c@{T0}"
    assert parse_fire(fire_id("job", T0)) == ("job", T0, None)
    tag = new_tag("trigger")
    assert tag[0] == "t" and len(tag) == 7 and new_tag("a")[0] == "a"
    assert parse_fire(fire_id("job", T0, tag)) == ("job", T0, tag)
    with pytest.raises(ValueError):
        parse_fire("no-at-sign")
    with pytest.raises(ValueError):
        new_tag("x")


# -- plan ------------------------------------------------------------------------------------
def test_plan_is_idempotent_and_never_resurrects(s: Scripts, r: redis.Redis) -> None:
    publish(s)
    entry = ("a", D1, T0 + 3 * MIN, minutes(1, 2, 3))
    assert s.plan(K, [entry]).added == 3
    assert s.plan(K, [entry]).added == 0
    for c in s.claim(K, "w", batch=2, now_ms=T0 + 2 * MIN).claimed:
        s.ack(K, c.fire_id, c.token, c.job, {"status": "ok"})
    assert s.plan(K, [entry]).added == 0
    assert queued(r) == [fire_id("a", T0 + 3 * MIN)]
    assert r.hget(K.watermarks, "a") == str(T0 + 3 * MIN)


def test_plan_adds_only_after_watermark_and_up_to_upto(s: Scripts, r: redis.Redis) -> None:
    publish(s)  # watermark = T0: fires at T0 itself were due before the definition
    res = s.plan(K, [("a", D1, T0 + 2 * MIN, [T0, *minutes(1, 2, 3)])])
    assert res.added == 2 and queued(r) == [fire_id("a", d) for d in minutes(1, 2)]


def test_plan_refuses_a_stale_digest(s: Scripts, r: redis.Redis) -> None:
    publish(s)
    res = s.plan(K, [("a", D2, T0 + MIN, minutes(1)), ("nope", D1, T0 + MIN, minutes(1))])
    assert res.added == 0 and res.stale == ["a", "nope"] and queued(r) == []
    assert r.hget(K.watermarks, "a") == str(T0)


def test_plan_many_fires_in_one_call(s: Scripts, r: redis.Redis) -> None:
    publish(s)
    dues = [T0 + 1000 * i for i in range(1, 5001)]
    assert s.plan(K, [("a", D1, dues[-1], dues)]).added == 5000


# -- publish ---------------------------------------------------------------------------------
def test_publish_new_job(s: Scripts, r: redis.Redis) -> None:
    res = publish(s)
    assert (res.changed, res.removed, res.fires_removed, res.conflicts) == (1, 0, 0, [])
    assert r.hget(K.jobs, "a") == line() and r.hget(K.specs, "a") == SPEC
    assert r.hget(K.watermarks, "a") == str(T0)


def test_publish_changed_digest_resets_watermark_and_unqueues(s: Scripts, r: redis.Redis) -> None:
    setup_job(s, dues=(1, 2, 3))
    old = [fire_id("a", d) for d in minutes(1, 2, 3)]
    res = s.publish(K, [("a", D1, line(D2), SPEC)], unqueue=[("a", "replaced", old[1:], "default")],
                    generation=1, now_ms=T0 + MIN // 2)
    assert (res.changed, res.fires_removed) == (1, 2)
    assert queued(r) == old[:1]
    assert r.hget(K.watermarks, "a") == str(T0 + MIN // 2)
    # Nothing leaves the queue without a history line: one per job, with the fires' range.
    (record,) = [json.loads(x) for x in r.lrange(K.history("a"), 0, -1)]
    assert record == {"job": "a", "status": "replaced", "reason": "replaced: definition changed",
                      "fires": 2, "first": T0 + 2 * MIN, "last": T0 + 3 * MIN,
                      "at": T0 + MIN // 2, "generation": 1}
    assert json.loads(r.lindex(K.events, 0)) == record


def test_publish_policy_only_change_keeps_watermark(s: Scripts, r: redis.Redis) -> None:
    setup_job(s)
    res = s.publish(K, [("a", D1, line(overlap="forbid"), SPEC)], generation=1, now_ms=T0 + MIN)
    assert res.changed == 1 and r.hget(K.watermarks, "a") == str(T0 + 10 * MIN)
    assert r.hget(K.jobs, "a") == line(overlap="forbid") and len(queued(r)) == 3


def test_publish_removal(s: Scripts, r: redis.Redis) -> None:
    setup_job(s, dues=(1,))
    res = s.publish(K, [], [("a", D1)], [("a", "removed", [fire_id("a", T0 + MIN)], "default")],
                    generation=1, now_ms=T0)
    assert (res.removed, res.fires_removed) == (1, 1) and queued(r) == []
    assert not r.hexists(K.jobs, "a") and not r.hexists(K.specs, "a")
    assert not r.hexists(K.watermarks, "a")
    record = json.loads(r.lindex(K.history("a"), 0))
    assert (record["status"], record["reason"], record["fires"]) == (
        "removed", "removed: job deleted from the file", 1)


def test_publish_of_a_fire_no_longer_queued_writes_no_history(s: Scripts,
                                                              r: redis.Redis) -> None:
    setup_job(s, dues=(1,))
    s.publish(K, [], [("a", D1)], [("a", "removed", [fire_id("a", T0 + 5 * MIN)], "default")],
              generation=1, now_ms=T0)
    assert r.lrange(K.history("a"), 0, -1) == []


def test_publish_of_an_older_generation_is_refused(s: Scripts, r: redis.Redis) -> None:
    setup_job(s, dues=(1,))
    s.publish(K, [("a", D1, line(D2), SPEC)], generation=3, now_ms=T0)
    with pytest.raises(Superseded, match="SUPERSEDED 3"):
        s.publish(K, [], [("a", D2)], [("a", "removed", [fire_id("a", T0 + MIN)], "default")],
                  generation=2, now_ms=T0)
    assert r.hget(K.jobs, "a") == line(D2) and queued(r) == [fire_id("a", T0 + MIN)]
    assert r.get(K.published) == "3"
    assert s.publish(K, [("a", D2, line(D1), SPEC)], generation=3, now_ms=T0).changed == 1


def test_generation_is_a_compare_and_set_on_the_newest_file(s: Scripts, r: redis.Redis) -> None:
    assert s.generation(K, "f1", "p1", None, 2, now_ms=T0) == (1, 1)
    assert s.generation(K, "f1", "p2", 1, 2, now_ms=T0 + 1) == (1, 0)  # already the newest
    assert s.generation(K, "f2", "p2", 0, 3, now_ms=T0 + 2) == (1, -1)  # saw an old one
    assert s.generation(K, "f2", "p2", 1, 3, now_ms=T0 + 3) == (2, 1)
    assert r.hgetall(K.generation) == {"gen": "2", "digest": "f2", "planner": "p2",
                                       "at": str(T0 + 3), "jobs": "3"}
    assert r.hgetall(K.generations) == {"f1": "1", "f2": "2"}
    assert s.generation(K, "f1", "p1", 2, 2, now_ms=T0 + 4) == (3, 1)  # a rollback
    assert r.hget(K.generations, "f1") == "3"


def test_publish_conflict_changes_nothing(s: Scripts, r: redis.Redis) -> None:
    setup_job(s, dues=(1,))
    res = s.publish(K, [("a", "-", line(D2), SPEC), ("b", D2, line(), SPEC)],
                    [("a", D2)], [("a", "removed", [fire_id("a", T0 + MIN)], "default")],
                    generation=1, now_ms=T0)
    assert res.conflicts == ["a", "b", "a"] and res.changed == 0 and res.removed == 0
    assert r.hget(K.jobs, "a") == line() and not r.hexists(K.jobs, "b")
    assert queued(r) == [fire_id("a", T0 + MIN)]  # fires of a conflicting job stay


# -- claim -----------------------------------------------------------------------------------
def test_claim_in_due_order_up_to_batch(s: Scripts, r: redis.Redis) -> None:
    setup_job(s, "a", (1, 3, 5))
    setup_job(s, "b", (2, 4, 9))
    res = s.claim(K, "w1", batch=3, lease_ms=30_000, scan_limit=10, now_ms=T0 + 5 * MIN)
    assert [c.fire_id for c in res.claimed] == [fire_id(j, d) for j, d in
                                                zip("aba", minutes(1, 2, 3), strict=True)]
    assert res.claimed[0] == Claim(fire_id("a", T0 + MIN), "a", 1, T0 + MIN, False, None)
    assert res.now_ms == T0 + 5 * MIN and res.next_ms == T0 + 4 * MIN and res.dropped == []
    assert r.zscore(K.working, fire_id("a", T0 + MIN)) == T0 + 5 * MIN + 30_000
    claim = json.loads(r.hget(K.claims, fire_id("a", T0 + MIN)))
    assert claim == {"worker": "w1", "token": 1, "due": T0 + MIN, "claimed_at": T0 + 5 * MIN}


def test_claim_leaves_fires_not_yet_due(s: Scripts, r: redis.Redis) -> None:
    setup_job(s, dues=(1, 2))
    res = s.claim(K, "w", batch=5, lease_ms=5 * MIN, now_ms=T0 + MIN + 1)
    assert len(res.claimed) == 1 and queued(r) == [fire_id("a", T0 + 2 * MIN)]
    assert res.next_ms == T0 + 2 * MIN
    assert s.claim(K, "w", batch=5, now_ms=T0).claimed == []


def test_claim_nothing_queued(s: Scripts) -> None:
    res = s.claim(K, "w", batch=5)  # server clock
    assert res.claimed == [] and res.dropped == [] and res.next_ms == -1 and res.now_ms > T0


def test_claim_reclaims_stale_leases_first_with_a_higher_token(s: Scripts, r: redis.Redis) -> None:
    setup_job(s, dues=(1, 2))
    first = s.claim(K, "w1", batch=1, lease_ms=1000, now_ms=T0 + 2 * MIN).claimed[0]
    assert first.token == 1
    res = s.claim(K, "w2", batch=1, lease_ms=1000, now_ms=T0 + 2 * MIN + 1000)
    assert [(c.fire_id, c.token, c.reclaimed) for c in res.claimed] == [(first.fire_id, 2, True)]
    assert json.loads(r.hget(K.claims, first.fire_id))["reclaimed"] is True
    assert json.loads(r.lindex(K.events, 0))["event"] == "reclaimed"


def test_a_claim_names_each_fire_with_its_own_payload_and_holder_before(
        s: Scripts, r: redis.Redis) -> None:
    # The reply carries a fire's payload and the holder before it apart from the fire:
    # a reclaimed one-off with a payload, a plain fire and a one-off with another payload
    # come back each with its own.
    setup_job(s, dues=(2,))
    first, second = (fire_id("a", T0 + n * MIN, new_tag("trigger")) for n in (1, 2))
    s.enqueue(K, first, T0 + MIN, {"n": 1})
    lapsed = s.claim(K, "w1", batch=1, lease_ms=1000, now_ms=T0 + MIN).claimed[0]
    assert (lapsed.fire_id, lapsed.payload, lapsed.reclaimed) == (first, {"n": 1}, False)
    before = json.loads(r.hget(K.claims, first))
    s.enqueue(K, second, T0 + 2 * MIN, {"n": 2})
    res = s.claim(K, "w2", batch=3, now_ms=T0 + 3 * MIN)
    assert res.claimed[0] == Claim(first, "a", 2, T0 + MIN, True, {"n": 1}, before)
    # (the two due at one time come in the queue's order of their ids)
    assert sorted(res.claimed[1:]) == sorted([
        Claim(fire_id("a", T0 + 2 * MIN), "a", 1, T0 + 2 * MIN),
        Claim(second, "a", 1, T0 + 2 * MIN, False, {"n": 2})])
    assert res.dropped == [] and res.aside == []


def test_claim_dead_letters_a_stale_fire_out_of_attempts(s: Scripts, r: redis.Redis) -> None:
    # No retries, yet a lost lease is run again: a dying worker is not a failing job.
    # Two lost leases beyond the attempts the job has: the fire is dead (a poison pill).
    setup_job(s, dues=(1,), attempts=1)
    fid = fire_id("a", T0 + MIN)
    s.claim(K, "w1", batch=1, lease_ms=1000, now_ms=T0 + MIN)
    for token, at in ((2, T0 + MIN + 1000), (3, T0 + MIN + 2000)):
        res = s.claim(K, "w2", batch=1, lease_ms=1000, now_ms=at)
        assert [(c.fire_id, c.token) for c in res.claimed] == [(fid, token)]
    res = s.claim(K, "w2", batch=1, lease_ms=1000, now_ms=T0 + MIN + 3000)
    assert res.claimed == [] and res.dropped == [(fid, "dead")]
    assert r.zscore(K.dead, fid) == T0 + MIN + 3000 and r.zcard(K.working) == 0
    assert r.hget(K.attempts, fid) == "3"  # kept, so a dead retry can requeue it


@pytest.mark.parametrize("policy, reason", [
    ({"paused": 1}, "paused"),
    ({"deadline": 30_000}, "missed"),
    ({"catch_up": "none", "deadline": 60_000}, "missed"),
])
def test_claim_drops_by_policy(s: Scripts, r: redis.Redis, policy: dict[str, object],
                               reason: str) -> None:
    setup_job(s, dues=(1,), **policy)
    res = s.claim(K, "w", batch=5, now_ms=T0 + 3 * MIN)
    assert res.claimed == [] and res.dropped == [(fire_id("a", T0 + MIN), reason)]
    assert queued(r) == [] and json.loads(r.lindex(K.events, 0))["reason"] == reason


def test_claim_drops_fires_of_removed_and_runtime_paused_jobs(s: Scripts, r: redis.Redis) -> None:
    setup_job(s, "gone", dues=(1,))
    setup_job(s, "held", dues=(1,))
    s.publish(K, [], [("gone", D1)], generation=1, now_ms=T0)
    r.hset(K.paused, "held", json.dumps({"note": "maintenance", "since": T0}))
    trigger = fire_id("held", T0 + MIN, new_tag("trigger"))
    s.enqueue(K, trigger, T0 + MIN, {"n": 1})
    res = s.claim(K, "w", batch=5, now_ms=T0 + 2 * MIN)
    assert sorted(res.dropped) == [(fire_id("gone", T0 + MIN), "removed"),
                                   (fire_id("held", T0 + MIN), "paused")]
    # An explicit trigger of a paused job still runs.
    assert [(c.fire_id, c.payload) for c in res.claimed] == [(trigger, {"n": 1})]


def test_claim_judges_each_job_of_one_policy_shape_by_its_own_pause_and_definition(
        s: Scripts, r: redis.Redis) -> None:
    # Jobs whose lines differ only in digest and definition share a parse: whether this
    # worker holds the job's definition and whether a runtime pause holds it stay the job's.
    jobs = {"a": "defa", "b": "defb", "c": "defc", "d": "defd"}
    s.publish(K, [(job, "-", f"{line()}|{definition}", SPEC) for job, definition in jobs.items()],
              generation=1, now_ms=T0)
    s.plan(K, [(job, D1, T0 + 10 * MIN, minutes(1)) for job in jobs])
    r.hset(K.held("w"), mapping={"a": "defa", "b": "old", "c": "defc", "d": "defd"})
    r.hset(K.paused, "c", json.dumps({"note": "maintenance", "since": T0}))
    res = s.claim(K, "w", batch=10, held=K.held("w"), now_ms=T0 + MIN + 5)
    assert sorted(c.fire_id for c in res.claimed) == [fire_id("a", T0 + MIN),
                                                       fire_id("d", T0 + MIN)]
    assert res.dropped == [(fire_id("c", T0 + MIN), "paused")]
    assert queued(r) == [fire_id("b", T0 + MIN)]  # left for a worker holding its definition


def test_claim_catch_up_latest_runs_only_the_newest(s: Scripts) -> None:
    setup_job(s, dues=(1, 2, 3), catch_up="latest")
    res = s.claim(K, "w", batch=5, scan_limit=10, now_ms=T0 + 3 * MIN + 5)
    assert [c.fire_id for c in res.claimed] == [fire_id("a", T0 + 3 * MIN)]
    assert res.dropped == [(fire_id("a", d), "catch_up latest") for d in minutes(1, 2)]


def test_claim_catch_up_latest_sees_past_the_fires_it_takes(s: Scripts) -> None:
    # A claim of one reads its first slice alone: the newer fires past it are read when the
    # oldest asks for its job's last fire, and the slices that follow take them from there.
    setup_job(s, dues=(1, 2, 3), catch_up="latest")
    res = s.claim(K, "w", batch=1, scan_limit=10, now_ms=T0 + 3 * MIN + 5)
    assert [c.fire_id for c in res.claimed] == [fire_id("a", T0 + 3 * MIN)]
    assert res.dropped == [(fire_id("a", d), "catch_up latest") for d in minutes(1, 2)]


@pytest.mark.parametrize(("scan", "newer_seen"), [(7, True), (6, False)])
def test_claim_catch_up_latest_of_fires_due_together_sees_the_newer_within_the_scan_only(
        s: Scripts, r: redis.Redis, scan: int, newer_seen: bool) -> None:
    # A first slice due at one time (a burst) reads past it only the fires scored later,
    # up to the scan's end: two more of that time come first, then f's, then a's newer
    # fire, the scan's seventh.
    for job in "abcdef":
        setup_job(s, job, dues={"a": (1, 3), "f": (2,)}.get(job, (1,)), catch_up="latest")
    res = s.claim(K, "w", batch=3, scan_limit=scan, now_ms=T0 + 3 * MIN + 5)
    if newer_seen:
        assert res.dropped == [(fire_id("a", T0 + MIN), "catch_up latest")]
        assert [c.fire_id for c in res.claimed] == [fire_id(j, T0 + MIN) for j in "bcd"]
    else:
        assert res.dropped == []
        assert [c.fire_id for c in res.claimed] == [fire_id(j, T0 + MIN) for j in "abc"]


def test_claim_catch_up_latest_of_fires_due_together_with_a_retry_scored_later(
        s: Scripts, r: redis.Redis) -> None:
    # A fire of the first slice scored after its due time (a retry, not judged itself):
    # the rest of the scan is read as it comes, and c's newer fire is seen in it.
    for job in "abc":
        setup_job(s, job, dues=(1, 2) if job == "c" else (1,), catch_up="latest")
    r.zadd(K.queue, {fire_id("b", T0 + MIN): T0 + MIN + 1})
    r.hset(K.attempts, fire_id("b", T0 + MIN), 1)
    res = s.claim(K, "w", batch=3, scan_limit=10, now_ms=T0 + 2 * MIN + 5)
    assert res.dropped == [(fire_id("c", T0 + MIN), "catch_up latest")]
    assert [c.fire_id for c in res.claimed] == [fire_id("a", T0 + MIN), fire_id("b", T0 + MIN),
                                                fire_id("c", T0 + 2 * MIN)]


def test_claim_catch_up_latest_sees_a_hosts_later_run_past_the_fires_it_takes(
        s: Scripts, r: redis.Redis) -> None:
    # One host's runs of an each-host job are an owner of their own (the job on that host):
    # its older run is skipped for its newer one past the first slice, another host's and
    # the job's own fire are not.
    publish(s, "a", catch_up="latest")
    fires = {f"a@{T0 + MIN}!@h1": T0 + MIN, f"a@{T0 + MIN}!@h2": T0 + MIN,
             f"a@{T0 + MIN}": T0 + MIN, f"a@{T0 + 2 * MIN}!@h1": T0 + 2 * MIN}
    r.zadd(K.queue, fires)
    res = s.claim(K, "w", batch=2, scan_limit=10, now_ms=T0 + 3 * MIN)
    assert res.dropped == [(f"a@{T0 + MIN}!@h1", "catch_up latest")]
    assert [c.fire_id for c in res.claimed] == [f"a@{T0 + MIN}", f"a@{T0 + MIN}!@h2"]


def test_claim_deadline_judges_first_starts_only(s: Scripts) -> None:
    setup_job(s, dues=(1,), deadline=30_000)
    c = s.claim(K, "w", batch=1, now_ms=T0 + MIN).claimed[0]
    s.fail(K, c.fire_id, c.token, "a", {"status": "failed"}, 100, 3, T0 + 5 * MIN, now_ms=T0 + MIN)
    res = s.claim(K, "w", batch=1, now_ms=T0 + 5 * MIN)  # 4 min late, but a retry
    assert [(x.fire_id, x.token) for x in res.claimed] == [(c.fire_id, 2)]


def test_claim_overlap_forbid_skips_while_running(s: Scripts, r: redis.Redis) -> None:
    setup_job(s, dues=(1, 2, 3), overlap="forbid")
    first = s.claim(K, "w", batch=1, lease_ms=5 * MIN, now_ms=T0 + MIN).claimed[0]
    assert r.hget(K.running, "a") == first.fire_id
    res = s.claim(K, "w", batch=1, now_ms=T0 + 2 * MIN)
    assert res.claimed == [] and res.dropped == [(fire_id("a", T0 + 2 * MIN), "overlap forbid")]
    s.ack(K, first.fire_id, first.token, "a", {"status": "ok"})
    assert not r.hexists(K.running, "a")
    assert len(s.claim(K, "w", batch=1, now_ms=T0 + 3 * MIN).claimed) == 1


def test_claim_overlap_replace_cancels_the_running_fire(s: Scripts, r: redis.Redis) -> None:
    setup_job(s, dues=(1, 2), overlap="replace")
    first = s.claim(K, "w", batch=1, lease_ms=5 * MIN, now_ms=T0 + MIN).claimed[0]
    second = s.claim(K, "w", batch=1, lease_ms=5 * MIN, now_ms=T0 + 2 * MIN).claimed[0]
    assert r.hget(K.cancels, first.fire_id) == "replaced"
    assert r.hget(K.running, "a") == second.fire_id
    assert s.heartbeat(K, 30_000, [(first.fire_id, 1), (second.fire_id, 1)],
                       now_ms=T0 + 2 * MIN) == [2, 1]
    s.ack(K, first.fire_id, 1, "a", {"status": "replaced"})
    assert r.hget(K.running, "a") == second.fire_id  # the replaced ack leaves the new run alone


def test_claim_next_ms_wakes_for_the_earliest_lease(s: Scripts) -> None:
    setup_job(s, dues=(1, 9))
    res = s.claim(K, "w", batch=1, lease_ms=1000, now_ms=T0 + MIN)
    assert res.next_ms == T0 + MIN + 1000


# -- heartbeat, ack, fail, release ------------------------------------------------------------
def test_heartbeat_extends_only_held_leases(s: Scripts, r: redis.Redis) -> None:
    setup_job(s, dues=(1,))
    c = s.claim(K, "w", batch=1, lease_ms=1000, now_ms=T0 + MIN).claimed[0]
    assert s.heartbeat(K, 5000, [(c.fire_id, c.token), (c.fire_id, 7), ("a@1", 1)],
                       now_ms=T0 + MIN + 500) == [1, 0, 0]
    assert r.zscore(K.working, c.fire_id) == T0 + MIN + 5500
    r.hset(K.cancels, c.fire_id, "cancelled")
    assert s.heartbeat(K, 5000, [(c.fire_id, c.token)]) == [2]
    assert s.heartbeat(K, 5000, []) == []


def test_ack_records_history_and_clears_state(s: Scripts, r: redis.Redis) -> None:
    setup_job(s, dues=(1,))
    s.enqueue(K, "a@5#tqqqqqq", T0 + MIN, {"p": 1})
    for c in s.claim(K, "w", batch=5, now_ms=T0 + MIN).claimed:
        s.ack(K, c.fire_id, c.token, "a", {"fire": c.fire_id, "status": "ok"}, history_cap=1)
    assert r.zcard(K.working) == 0
    for key in (K.claims, K.payloads):
        assert r.hlen(key) == 0, key
    assert r.hkeys(K.attempts) == [ATTEMPTS_PIN]  # no fire, and the hash stays a hash table
    assert r.object("encoding", K.attempts) == "hashtable"
    assert [json.loads(x)["status"] for x in r.lrange(K.history("a"), 0, -1)] == ["ok"]


def test_a_claim_makes_the_working_set_a_skiplist_that_holds_fires_only(
        s: Scripts, r: redis.Redis) -> None:
    # A few fires would make a compact list, scanned on every lookup; the member that turns
    # it into a skiplist is gone when the claim returns, and a later claim adds to the set.
    setup_job(s, dues=(1, 2, 3))
    first = s.claim(K, "w", batch=1, now_ms=T0 + 5 * MIN).claimed
    assert r.zrange(K.working, 0, -1) == [first[0].fire_id]
    assert r.object("encoding", K.working) == "skiplist"
    more = s.claim(K, "w", batch=2, now_ms=T0 + 5 * MIN).claimed
    assert sorted(r.zrange(K.working, 0, -1)) == sorted(c.fire_id for c in first + more)
    assert len(more) == 2 and r.object("encoding", K.working) == "skiplist"


def test_an_ack_keeps_the_newest_records_up_to_the_cap_even_a_lowered_one(
        s: Scripts, r: redis.Redis) -> None:
    setup_job(s, dues=(1, 2, 3, 4))
    claims = s.claim(K, "w", batch=4, now_ms=T0 + 5 * MIN).claimed
    assert len(claims) == 4

    def ack(c: Claim, cap: int) -> None:
        s.ack(K, c.fire_id, c.token, "a", {"fire": c.fire_id, "status": "ok"}, history_cap=cap)

    def kept() -> list[str]:
        return [json.loads(x)["fire"] for x in r.lrange(K.history("a"), 0, -1)]

    for c in claims[:3]:  # the third is one over the cap: the oldest goes
        ack(c, 2)
    assert kept() == [claims[2].fire_id, claims[1].fire_id]
    ack(claims[3], 1)  # a lowered cap: trimmed to it at once
    assert kept() == [claims[3].fire_id]


def test_ack_after_takeover_is_lease_lost_and_leaves_the_new_claim(s: Scripts,
                                                                   r: redis.Redis) -> None:
    setup_job(s, dues=(1,))
    old = s.claim(K, "w1", batch=1, lease_ms=1000, now_ms=T0 + MIN).claimed[0]
    new = s.claim(K, "w2", batch=1, lease_ms=1000, now_ms=T0 + MIN + 2000).claimed[0]
    with pytest.raises(LeaseLost, match="token 1 current 2"):
        s.ack(K, old.fire_id, old.token, "a", {"status": "ok"})
    assert r.hget(K.attempts, new.fire_id) == "2" and r.zscore(K.working, new.fire_id)
    assert r.hexists(K.claims, new.fire_id) and r.llen(K.history("a")) == 0
    assert s.ack_many(K, [(old.fire_id, 1, "a", {}), (new.fire_id, 2, "a", "{}")]) == [False, True]


def test_an_ack_batch_finishes_only_the_fires_in_working_and_each_once(
        s: Scripts, r: redis.Redis) -> None:
    # A fire whose token still matches but that left working (its lease lapsed and it was
    # handed back), and a fire named twice in one call, are lease lost; the others are done.
    setup_job(s, dues=(1, 2, 3))
    claims = s.claim(K, "w", batch=3, now_ms=T0 + 5 * MIN).claimed
    assert len(claims) == 3
    gone, kept, twice = claims
    r.zrem(K.working, gone.fire_id)
    items = [(c.fire_id, c.token, "a", {"fire": c.fire_id, "status": "ok"})
             for c in (gone, kept, twice, twice)]
    assert s.ack_many(K, items) == [False, True, True, False]
    assert r.zcard(K.working) == 0
    assert r.hget(K.attempts, gone.fire_id) == "1" and r.hexists(K.claims, gone.fire_id)
    for c in (kept, twice):
        assert not r.hexists(K.attempts, c.fire_id) and not r.hexists(K.claims, c.fire_id)
    assert sorted(json.loads(x)["fire"] for x in r.lrange(K.history("a"), 0, -1)) == sorted(
        [kept.fire_id, twice.fire_id])


def test_an_ack_of_a_fire_that_left_working_with_its_token_is_refused_and_writes_nothing(
        s: Scripts, r: redis.Redis, redis_url: str) -> None:
    # Two fires leave working with their attempts kept, so their holders' tokens are still
    # current: one's lease lapsed and a claim by a worker without the job's definition
    # handed it back (its claim is kept too, for the next holder to see), the other failed
    # and waits for its retry. Their old holders' acks are lease lost and change nothing.
    now = int(r.time()[0]) * 1000  # (a record of runs of a long gone period expires at once)
    publish(s, "a")
    s.plan(K, [("a", D1, now + MIN, [now, now + MIN])])
    first, second = s.claim(K, "w1", batch=2, lease_ms=1000, now_ms=now + MIN).claimed
    s.fail(K, second.fire_id, second.token, "a", {"status": "error"}, 10, 3, now + 9 * MIN,
           now_ms=now + MIN)
    later = s.claim(K, "w2", batch=2, held=K.held("none"), now_ms=now + MIN + 2000)
    assert not later.claimed and set(queued(r)) == {first.fire_id, second.fire_id}
    assert r.hexists(K.claims, first.fire_id) and r.zcard(K.working) == 0
    raw = redis.Redis.from_url(redis_url)
    state = sorted(raw.keys())

    def dumped() -> dict[bytes, bytes | None]:
        return {key: raw.dump(key) for key in state}

    before = dumped()
    items = [(c.fire_id, c.token, "a", {"fire": c.fire_id, "status": "ok"})
             for c in (first, second)]
    assert s.ack_many(K, items) == [False, False]
    with pytest.raises(LeaseLost, match=f"{first.fire_id} token 1 current 1"):
        s.ack(K, first.fire_id, first.token, "a", {"status": "ok"})
    assert sorted(raw.keys()) == state and dumped() == before


def test_an_ack_of_fires_of_one_job_in_a_row_writes_what_an_ack_each_writes(
        s: Scripts, r: redis.Redis, redis_url: str) -> None:
    # Fires of one job in a row share an LPUSH, and those of one record of runs an APPEND:
    # job a's fires, in one call, leave the history (newest first, over the cap) and the
    # records of runs (of two periods, each expiring from its period's end) that job b's,
    # acked one call each, leave. Leases lost in the middle and at the end, a one-off (not
    # recorded) and a fire of another job after them are written or refused as alone.
    # (Dues from the server's clock: a record of runs whose period ended long ago expires
    # at once.)
    now = int(r.time()[0]) * 1000
    to_next = PERIOD_MS - now % PERIOD_MS  # ms to the next period (some minutes away)
    to_next += PERIOD_MS if to_next < 10 * MIN else 0
    dues = [now + d for d in (MIN, 2 * MIN, 3 * MIN, to_next, to_next + MIN)]
    for job in ("a", "b"):
        publish(s, job)
        s.plan(K, [(job, D1, dues[-1], dues)])
        s.enqueue(K, f"{job}@5#tqqqqqq", now)
    publish(s, "c")
    s.plan(K, [("c", D1, now + MIN, [now, now + MIN])])
    claims = s.claim(K, "w", batch=20, now_ms=dues[-1] + MIN).claimed
    assert len(claims) == 14

    def items(job: str) -> list[tuple[str, int, str, dict[str, object]]]:
        mine = sorted((c for c in claims if c.job == job), key=lambda c: c.fire_id)
        mine.insert(3, mine.pop())  # the one-off, in the middle
        return [(c.fire_id, c.token, job, {"fire": c.fire_id, "status": "ok"}) for c in mine]

    for job in ("a", "b"):  # newer claims of its third fire and of its last
        for item in (items(job)[2], items(job)[-1]):
            r.hincrby(K.attempts, item[0], 1)
    # c's fires trigger a job: the call's key after c's is its history again
    c = [(c.fire_id, c.token, "c", {}, "next") for c in claims if c.job == "c"]
    together = s.ack_many(K, items("a") + c[:1], history_cap=4)
    alone = [s.ack_many(K, [item], history_cap=4)[0] for item in items("b") + c[1:]]
    assert together == alone == [True, True, False, True, True, False, True]

    def kept(job: str) -> list[str]:
        return [json.loads(x)["fire"].replace(f"{job}@", "@")
                for x in r.lrange(K.history(job), 0, -1)]

    assert kept("a") == kept("b") and len(kept("a")) == 4
    periods = sorted({period_of(d) for d in dues})
    assert len(periods) == 2
    raw = redis.Redis.from_url(redis_url)  # the records are bytes
    for p in periods:
        a, b = K.ran("a", p), K.ran("b", p)
        assert raw.get(a) == raw.get(b) and r.strlen(a) == (8 if p == periods[0] else 4)
        ends = (p + 1) * PERIOD_MS + REACH_MS - int(r.time()[0]) * 1000
        assert abs(r.pttl(a) - r.pttl(b)) < 1000 and abs(r.pttl(a) - ends) < 2000
    assert r.llen(K.history("c")) == 2 and r.llen(K.outbox) == 2
    assert r.hget(K.attempts, items("a")[2][0]) == "2" and r.zcard(K.working) == 4


def test_an_ack_makes_or_appends_each_record_of_runs_whatever_came_before(
        s: Scripts, r: redis.Redis, redis_url: str) -> None:
    # Fires each of its own record of runs, in one call: some records there already (an
    # append, their expiry kept), the others made by the fire (their expiry from the
    # period's end), in every order of the two (the ack tries first what the fire before
    # needed). (Due from the server's clock: a record whose period ended long ago expires.)
    now = int(r.time()[0]) * 1000
    due = now - now % MIN + MIN
    made = [False, True, True, False, False, True, False, True, True]  # made by the ack
    jobs = [f"j{i}" for i in range(len(made))]
    for job in jobs:
        publish(s, job)
        s.plan(K, [(job, D1, due, [due])])
    raw = redis.Redis.from_url(redis_url)  # the records are bytes
    period = period_of(due)
    for job, new in zip(jobs, made, strict=True):
        if not new:
            raw.set(K.ran(job, period), b"\xff\xff\xff\xff", px=600_000)
    claims = sorted(s.claim(K, "w", batch=20, now_ms=due + MIN).claimed, key=lambda c: c.job)
    assert [c.job for c in claims] == jobs
    assert s.ack_many(K, [(c.fire_id, c.token, c.job, {"fire": c.fire_id, "status": "ok"})
                          for c in claims], history_cap=4) == [True] * len(jobs)
    entry = struct.pack(">I", due % PERIOD_MS)
    ends = (period + 1) * PERIOD_MS + REACH_MS - int(r.time()[0]) * 1000
    for job, new in zip(jobs, made, strict=True):
        key = K.ran(job, period)
        assert raw.get(key) == (entry if new else b"\xff\xff\xff\xff" + entry), job
        if new:
            assert abs(r.pttl(key) - ends) < 2000, job
        else:
            assert 0 < r.pttl(key) <= 600_000, job


def test_an_ack_batch_keeps_each_fires_output_and_chain_as_its_own(s: Scripts,
                                                                     r: redis.Redis) -> None:
    # Only some fires of a batch trigger jobs or kept output: each goes to its own fire.
    setup_job(s, dues=(1, 2, 3, 4))
    claims = s.claim(K, "w", batch=4, now_ms=T0 + 5 * MIN).claimed
    assert len(claims) == 4
    items: list[tuple[str, int, str, dict[str, object], str, str]] = []
    for n, c in enumerate(claims):
        record = {"fire": c.fire_id, "status": "ok", "started": T0 + MIN + n, "duration_ms": 1}
        items.append((c.fire_id, c.token, "a", record, "next" if n == 1 else "",
                      f"printed by {n}" if n in (1, 2) else ""))
    assert s.ack_many(K, items) == [True] * 4
    assert {c.fire_id: r.hgetall(K.output(c.fire_id)) for c in claims} == {
        claims[0].fire_id: {}, claims[1].fire_id: {str(T0 + MIN + 1): "printed by 1"},
        claims[2].fire_id: {str(T0 + MIN + 2): "printed by 2"}, claims[3].fire_id: {}}
    for c in claims[1:3]:  # an output is kept for its retention, from its ack on
        assert OUTPUT_RETENTION_MS - 60_000 < r.pttl(K.output(c.fire_id)) <= OUTPUT_RETENTION_MS
    chains = [json.loads(e) for e in r.lrange(K.outbox, 0, -1)]
    assert [(e["event"], e["fire"], e["next"]) for e in chains] == [
        ("chain", claims[1].fire_id, "next")]
    assert r.llen(K.history("a")) == 4 and r.zcard(K.working) == 0


def test_an_ack_of_records_as_text_is_the_ack_of_the_records() -> None:
    records = [record(fire_id("a", T0 + n * MIN), "ok", started=T0 + n, duration_ms=n,
                      attempt=1, worker="w") for n in range(4)]
    items = [(r["fire"], 1, "a", r, "next" if n == 1 else "", f"out {n}" if n != 2 else "")
             for n, r in enumerate(records)]
    texts = [(fid, token, job, record_json(r), then, output, r["started"])
             for fid, token, job, r, then, output in items]
    assert ack_call(K, texts, 100, 5) == ack_call(K, items, 100, 5)
    # without its start, a record given as text keeps no output
    bare = [(fid, token, job, record_json(r), then, output)
            for fid, token, job, r, then, output in items]
    assert ack_call(K, bare, 100, 5) == ack_call(
        K, [(fid, t, job, record_json(r), then, "") for fid, t, job, r, then, _ in items], 100, 5)


def test_an_ack_made_fire_by_fire_with_names_kept_is_the_ack_of_its_items() -> None:
    # The names a worker keeps from ack to ack (record strings, histories) make the same
    # call as fresh ones; a fire whose values make no entry leaves the call as it was.
    keys = Keys(prefix="p:", shard=2)
    names: tuple[RanEntries, dict[str, str]] = (RanEntries(keys), {})
    items = [(fire_id(job, T0 + n * MIN), n % 3 + 1, job, record_json(
              record(fire_id(job, T0 + n * MIN), "ok", attempt=1)),
              "next" if n == 2 else "", "out" if n % 2 else "", T0 + n)
             for n in range(6) for job in ("a", "b")]
    for part in (items[:5], items[5:]):  # the second call reuses the first's names
        call = AckCall(keys, 7, 9, *names)
        for n, item in enumerate(part):
            call.add(*item)
            if n == 1:
                with pytest.raises(ValueError):
                    call.add("a@soon", 1, "a", "{}")
        assert call.made() == ack_call(keys, part, 7, 9)
        assert not call.full
    assert set(names[1]) == {"a", "b"}
    call = AckCall(keys, 7)
    for n in range(ACK_CHUNK):
        assert not call.full
        call.add(fire_id("a", T0 + n), 1, "a", "{}")
    assert call.full


def test_fail_retries_with_backoff_then_dead_letters(s: Scripts, r: redis.Redis) -> None:
    setup_job(s, dues=(1,), attempts=2)
    fid = fire_id("a", T0 + MIN)
    c = s.claim(K, "w", batch=1, now_ms=T0 + MIN).claimed[0]
    assert s.fail(K, fid, c.token, "a", {"status": "failed"}, 100, 2, T0 + 2 * MIN,
                  now_ms=T0 + MIN) == ("retry", T0 + 2 * MIN)
    assert r.zscore(K.queue, fid) == T0 + 2 * MIN and r.zcard(K.working) == 0
    assert s.claim(K, "w", batch=1, now_ms=T0 + 2 * MIN - 1).claimed == []
    c = s.claim(K, "w", batch=1, now_ms=T0 + 2 * MIN).claimed[0]
    assert (c.token, c.due_ms) == (2, T0 + MIN)
    verdict, at = s.fail(K, fid, 2, "a", {"status": "timeout"}, 100, 2, T0 + 9 * MIN,
                         now_ms=T0 + 3 * MIN)
    assert (verdict, at) == ("dead", T0 + 3 * MIN) and r.zscore(K.dead, fid) == at
    assert queued(r) == [] and r.hget(K.attempts, fid) == "2"
    statuses = [json.loads(x)["status"] for x in r.lrange(K.history("a"), 0, -1)]
    assert statuses == ["dead", "timeout", "failed"]
    with pytest.raises(LeaseLost):
        s.fail(K, fid, 2, "a", {}, 100, 2, T0)


@pytest.mark.parametrize(("failed", "reason", "worker"), [
    ({"status": "failed", "reason": "exit 3", "worker": "w1"}, "no attempts left: exit 3", "w1"),
    ({"status": "timeout", "worker": None}, "no attempts left: timeout", None),
    ("not json", "no attempts left", None),
])
def test_fail_writes_a_dead_line_with_every_history_field(
        s: Scripts, r: redis.Redis, failed: object, reason: str, worker: str | None) -> None:
    setup_job(s, dues=(1,), attempts=1)
    c = s.claim(K, "w", batch=1, now_ms=T0 + MIN).claimed[0]
    assert s.fail(K, c.fire_id, c.token, "a", failed, 100, 1, T0 + 2 * MIN,
                  now_ms=T0 + 2 * MIN) == ("dead", T0 + 2 * MIN)
    dead, attempt = r.lrange(K.history("a"), 0, 1)
    # Field for field and in order, what the Python record of that dead fire is.
    expected = history.record(c.fire_id, "dead", reason=reason, attempt=1, worker=worker)
    assert dead == json.dumps(expected, separators=(",", ":"))
    assert list(json.loads(dead)) == list(history.HistoryRecord.__annotations__)
    assert json.loads(dead)["scheduled"] == T0 + MIN and attempt == _json_text(failed)


def _json_text(value: object) -> str:
    return value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))


def test_release_puts_claims_back_without_using_an_attempt(s: Scripts, r: redis.Redis) -> None:
    setup_job(s, dues=(1, 2))
    claims = s.claim(K, "w", batch=2, now_ms=T0 + 5 * MIN).claimed
    pairs = [(c.fire_id, c.token) for c in claims]
    assert s.release(K, [*pairs, (claims[0].fire_id, 9)]) == 2
    assert r.zrange(K.queue, 0, -1, withscores=True) == [
        (fire_id("a", d), d) for d in minutes(1, 2)]
    assert r.hkeys(K.attempts) == [ATTEMPTS_PIN]
    assert r.hlen(K.claims) == 0 and r.zcard(K.working) == 0
    assert s.release(K, pairs) == 0 and s.release(K, []) == 0
    again = s.claim(K, "w", batch=2, now_ms=T0 + 5 * MIN).claimed
    assert [c.token for c in again] == [1, 1]


# -- record, enqueue, cancel -------------------------------------------------------------------
def test_record_caps_history(s: Scripts, r: redis.Redis) -> None:
    for i in range(5):
        s.record(K, "a", {"fire": f"a@{i}", "status": "missed"}, history_cap=3)
    assert [json.loads(x)["fire"] for x in r.lrange(K.history("a"), 0, -1)] == [
        "a@4", "a@3", "a@2"]
    assert r.llen(K.events) == 5


def test_enqueue_and_cancel(s: Scripts, r: redis.Redis) -> None:
    publish(s)
    fid = fire_id("a", T0, new_tag("at"))
    assert s.enqueue(K, fid, T0, {"x": [1, 2]}) is True
    assert s.enqueue(K, fid, T0, None) is False
    assert json.loads(r.hget(K.payloads, fid)) == {"x": [1, 2]}
    with pytest.raises(UnknownJob, match="nope"):
        s.enqueue(K, fire_id("nope", T0), T0)
    with pytest.raises(UnknownJob, match="a@x"):
        s.enqueue(K, "a@x", T0)  # not a fire id
    assert s.cancel(K, fid, now_ms=T0) is True
    assert queued(r) == [] and r.hlen(K.payloads) == 0
    assert json.loads(r.lindex(K.events, 0)) == {"event": "cancelled", "fire": fid, "at": T0}
    assert s.cancel(K, fid) is False


# -- pause, resume, purge, retry ---------------------------------------------------------------
def test_pause_names_the_claimed_fires_of_that_job_only(s: Scripts, r: redis.Redis) -> None:
    setup_job(s, "a", dues=(1,))
    setup_job(s, "ab", dues=(1,))  # "ab@..." begins with "a", not with "a@"
    claims = s.claim(K, "w", batch=5, lease_ms=MIN, now_ms=T0 + MIN).claimed
    assert len(claims) == 2
    since, held = s.pause(K, "a", "maintenance", now_ms=T0 + MIN + 1)
    assert since == T0 + MIN + 1
    assert [(fid, until) for fid, until, _ in held] == [(fire_id("a", T0 + MIN), T0 + 2 * MIN)]
    assert json.loads(held[0][2])["worker"] == "w"


def test_resume_queues_cron_fires_of_the_job_again(s: Scripts, r: redis.Redis) -> None:
    publish(s)
    s.pause(K, "a", now_ms=T0)
    pause = r.hget(K.paused, "a")
    for wrong in (fire_id("b", T0 + MIN), fire_id("a", T0 + MIN, "tabcdefg"), "a@x"):
        with pytest.raises(ScriptError, match="NOT_A_CRON_FIRE"):
            s.resume(K, "a", pause, [fire_id("a", T0 + MIN), wrong], now_ms=T0 + MIN)
    assert r.hget(K.paused, "a") == pause and queued(r) == []
    fires = [fire_id("a", d) for d in minutes(1, 2)]
    assert s.resume(K, "a", pause, fires, now_ms=T0 + 3 * MIN) == (1, fires)
    assert r.zrange(K.queue, 0, -1, withscores=True) == list(zip(fires, minutes(1, 2), strict=True))
    assert json.loads(r.lindex(K.events, 0)) == {"event": "resumed", "job": "a",
                                                 "at": T0 + 3 * MIN, "requeued": 2}
    assert s.resume(K, "a", now_ms=T0 + 3 * MIN) == (0, [])


def _dead(s: Scripts, job: str) -> str:
    setup_job(s, job, dues=(1,), attempts=1)
    (c,) = [c for c in s.claim(K, "w", batch=5, now_ms=T0 + MIN).claimed if c.job == job]
    assert s.fail(K, c.fire_id, 1, job, {}, 100, 1, T0, now_ms=T0 + MIN).verdict == "dead"
    return c.fire_id


def test_purge_forgets_the_dead_fires_of_one_job(s: Scripts, r: redis.Redis) -> None:
    a, ab = _dead(s, "a"), _dead(s, "ab")
    assert s.purge_dead(K, "a", now_ms=T0 + 2 * MIN) == 1
    assert r.zrange(K.dead, 0, -1) == [ab] and not r.hexists(K.attempts, a)
    assert json.loads(r.lindex(K.events, 0)) == {"event": "purged", "job": "a",
                                                 "at": T0 + 2 * MIN, "count": 1}
    assert s.purge_dead(K, "a") == 0 and s.purge_dead(K) == 1 and r.zcard(K.dead) == 0


def test_retry_dead_queues_it_now_with_fresh_attempts(s: Scripts, r: redis.Redis) -> None:
    fid = _dead(s, "a")
    assert s.retry_dead(K, fid, now_ms=T0 + 5 * MIN) is True
    assert r.zscore(K.queue, fid) == T0 + 5 * MIN and r.hget(K.attempts, fid) == "0"
    assert json.loads(r.lindex(K.events, 0)) == {"event": "requeued", "fire": fid,
                                                 "at": T0 + 5 * MIN, "reason": "dead retry"}
    assert s.retry_dead(K, fid) is False


def test_thousands_of_fires_are_planned_and_claimed_in_one_call(s: Scripts, r: redis.Redis) -> None:
    # More fires than one command takes (lua/includes/bulk.lua sends them in slices).
    publish(s, "a")
    dues = [T0 + i for i in range(1, 5001)]
    assert s.plan(K, [("a", D1, dues[-1], dues)]).added == 5000
    assert s.plan(K, [("a", D1, dues[-1], dues)]).added == 0
    res = s.claim(K, "w", batch=4500, now_ms=dues[-1])
    assert [c.fire_id for c in res.claimed] == [fire_id("a", d) for d in dues[:4500]]
    assert r.zcard(K.working) == r.hlen(K.attempts) - 1 == r.hlen(K.claims) == 4500
    assert r.zrange(K.queue, 0, -1) == [fire_id("a", d) for d in dues[4500:]]


# -- the events list -------------------------------------------------------------------------
EVENTS_KEPT = 10_000


def test_events_list_is_capped_by_one_event_and_by_a_batch(s: Scripts, r: redis.Redis) -> None:
    r.rpush(K.events, *(["old"] * EVENTS_KEPT))
    s.record(K, "a", {"fire": "a@1", "status": "missed"})
    assert r.llen(K.events) == EVENTS_KEPT and json.loads(r.lindex(K.events, 0))["fire"] == "a@1"
    setup_job(s, dues=(1, 2, 3), catch_up="latest")
    res = s.claim(K, "w", batch=5, scan_limit=10, now_ms=T0 + 5 * MIN)
    assert len(res.dropped) == 2 and r.llen(K.events) == EVENTS_KEPT
    first, second, recorded = map(json.loads, r.lrange(K.events, 0, 2))
    assert (first["event"], second["event"], recorded["fire"]) == ("dropped", "dropped", "a@1")
    assert r.lindex(K.events, -1) == "old"


# -- loading -----------------------------------------------------------------------------------
def test_every_script_is_there_with_a_header() -> None:
    sources = load_sources()
    assert set(sources) == {"publish", "plan", "claim", "heartbeat", "ack", "fail", "release",
                            "record", "enqueue", "cancel", "pause", "resume", "retry", "purge",
                            "generation", "schedule-set", "schedule-delete", "schedule-plan",
                            "schedule-due", "schedule-aside",
                            "notify-lease", "notify-route", "notify-settle", "each-host",
                            "chain", "backfill", "dispatch"}
    # Which KEYS and ARGV each header lists, and that the body agrees: test_lua_headers.py.
    for src in sources.values():
        assert "-- Returns" in src.path.read_text().split("-- @include")[0], src.path.name
        assert "..'" not in src.text


def test_no_script_copies_a_shared_snippet() -> None:
    """The clock, the events cap, and the patterns and the making of fire ids live in
    lua/includes/ only."""
    for src in load_sources().values():
        own = src.path.read_text()
        body = "\n".join(x for x in own.splitlines() if not x.lstrip().startswith("--"))
        assert "TIME" not in body, f"{src.path.name}: -- @include now.lua"
        assert "9999" not in body and "10000" not in body, f"{src.path.name}: events.lua"
        assert not re.search(r"@%d|@\(|\)@|string\.\w+\(fid\b|'@' \.\.", body), (
            f"{src.path.name}: fires.lua")


def test_key_count_is_checked(s: Scripts) -> None:
    with pytest.raises(ScriptError, match="takes 2 keys, got 1"):
        s.run("record", [K.history("a")], ["{}", 10])
    with pytest.raises(ScriptError, match="no script"):
        s.run("nope", [], [])


def test_scripts_reload_after_script_flush(s: Scripts, r: redis.Redis) -> None:
    setup_job(s, dues=(1, 2))
    c = s.claim(K, "w", batch=1, now_ms=T0 + 5 * MIN).claimed[0]
    r.script_flush()
    s.ack(K, c.fire_id, c.token, "a", {"status": "ok"})
    c = s.claim(K, "w", batch=1, now_ms=T0 + 5 * MIN).claimed[0]
    r.script_flush()
    assert s.ack_many(K, [(c.fire_id, c.token, "a", {"status": "ok"})]) == [True]
    assert r.llen(K.history("a")) == 2


def test_works_without_decode_responses(redis_url: str) -> None:
    client = redis.Redis.from_url(redis_url)
    s, p = Scripts(client), Keys(prefix="p:")
    s.publish(p, [("a", "-", line(), SPEC)], generation=1, now_ms=T0)
    s.plan(p, [("a", D1, T0 + MIN, [T0 + MIN])])
    s.enqueue(p, "a@1#tzzzzzz", 1, "text")
    res = s.claim(p, "w", batch=5, now_ms=T0 + MIN)
    assert [(c.fire_id, c.payload) for c in res.claimed] == [("a@1#tzzzzzz", "text"),
                                                            (f"a@{T0 + MIN}", None)]
    assert client.exists("p:cron:queue") == 0 and client.zcard("p:scheduler:working") == 2
    client.close()
