"""Runtime schedules through the Client, on a real Redis: validation, upserts and their
outcomes, what they queue and unqueue, deletes, pauses, listing, and races between two
clients and two planners."""

from __future__ import annotations

import dataclasses
import json
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import redis

from cronsvc.client.client import Client
from cronsvc.client.schedules import HORIZON_MS
from cronsvc.clock import FixedClock
from cronsvc.errors import BadSchedule, UnknownSchedule
from cronsvc.fires import fire_id, parse_fire, schedule_of
from cronsvc.keys import Keys
from cronsvc.planner.planner import Planner
from cronsvc.presence import planner_stale_ms
from cronsvc.schedule.expand import next_fires
from cronsvc.schedule.runtime import (
    MAX_AHEAD,
    MAX_PAYLOAD_BYTES,
    build,
    parse_stored,
    plan_schedule,
)
from cronsvc.store.scripts import UNREAD

K = Keys()
FILE = """
jobs:
  digest:
    call: cronsvc.testing.ledger:record
    kwargs: {path: /dev/null}
  report:
    cron: "0 0 1 1 *"
    command: ["true"]
"""


@pytest.fixture
def client(tmp_path: Path, redis_url: str) -> Client:
    path = tmp_path / "schedules.yaml"
    path.write_text(FILE)
    c = Client(redis_url, config=str(path))
    c.publish_config()
    return c


def queued(r: redis.Redis, sid: str) -> list[str]:
    return [f for f in r.zrange(K.queue, 0, -1) if schedule_of(f) == sid]


BAD = [
    (dict(id="x", job="digst", cron="0 9 * * *"),
     "schedule 'x': job: unknown job 'digst'; did you mean 'digest'?"),
    (dict(id="x", job="digest", cron="61 * * * *"),
     "schedule 'x': cron: '61 * * * *': minute 61 out of range 0-59"),
    (dict(id="x", job="digest", cron="0 9 * * *", timezone="Europe/Berln"),
     "schedule 'x': timezone: unknown time zone 'Europe/Berln'; did you mean 'Europe/Berlin'?"),
    (dict(id="has space", job="digest", cron="0 9 * * *"), "schedule id 'has space': use 1 to"),
    (dict(id="a!b", job="digest", cron="0 9 * * *"), "schedule id 'a!b': use 1 to"),
    (dict(id="x" * 201, job="digest", cron="0 9 * * *"), "use 1 to 200 letters"),
    (dict(id="x", job="digest", cron="0 9 * * *", payload="p" * MAX_PAYLOAD_BYTES),
     "schedule 'x': payload: 65,538 bytes as JSON; at most 65,536"),
    (dict(id="x", job="digest", cron="0 9 * * *", start="2030-01-02T00:00:00Z",
          end="2030-01-01T00:00:00Z"), "schedule 'x': end: must be after start"),
    (dict(id="x", job="digest"), "schedule 'x': cron: set cron or every"),
    (dict(id="x", job="digest", cron="* * * * *", every="1m"),
     "schedule 'x': cron: set either cron or every, not both"),
    (dict(id="x", job="digest", every="0.5s"), "schedule 'x': every: '0.5s': at least 1s"),
    (dict(id="x", job="digest", every="1h", anchor="soon"),
     "schedule 'x': anchor: 'soon': not an ISO 8601 time"),
    (dict(id="x", job="digest", cron="0 9 * * *", max_runs=0),
     "schedule 'x': max_runs: 0: a whole number of at least 1"),
    (dict(id="x", job="digest", cron="0 9 * * *", start="2099-01-01T00:00:00Z"),
     "schedule 'x': start: '2099-01-01T00:00:00Z' is more than 10 years ahead"),
    (dict(id="x", job="digest", cron="0 9 * * *", overlap="sometimes"),
     "schedule 'x': overlap: 'sometimes': one of allow, forbid, replace"),
    (dict(id="x", job="digest", cron="0 9 * * *", payload={1, 2}),
     "schedule 'x': payload: not JSON"),
    (dict(id="x", job="digest", cron="0 9 * * *", colour="red"),
     "schedule 'x': build() got an unexpected keyword argument 'colour'"),
]


@pytest.mark.parametrize(("fields", "message"), BAD, ids=[m[:40] for _, m in BAD])
def test_bad_input_is_one_clear_error_and_changes_nothing(
        client: Client, r: redis.Redis, fields: dict[str, object], message: str) -> None:
    with pytest.raises(BadSchedule) as caught:
        client.upsert_schedule(**fields)  # type: ignore[arg-type]
    assert message in str(caught.value)
    assert isinstance(caught.value, ValueError)
    assert r.hlen(K.schedules) == 0 and client.count_schedules() == 0


def test_a_batch_with_one_bad_item_changes_nothing(client: Client, r: redis.Redis) -> None:
    with pytest.raises(BadSchedule, match="schedule 'b': cron"):
        client.upsert_schedules([{"id": "a", "job": "digest", "cron": "0 9 * * *"},
                                 {"id": "b", "job": "digest", "cron": "nope"}])
    assert r.hlen(K.schedules) == 0


def test_upsert_is_idempotent_and_says_what_it_did(client: Client, r: redis.Redis) -> None:
    now = client.server_ms()
    assert client.upsert_schedule("digest:user-42", job="digest", cron="0 9 * * *",
                                  timezone="Europe/Berlin", payload={"user": 42},
                                  actor="signup") == "created"
    assert client.upsert_schedule("digest:user-42", job="digest", cron="0 9 * * *",
                                  timezone="Europe/Berlin", payload={"user": 42},
                                  actor="someone else") == "unchanged"
    s = client.get_schedule("digest:user-42")
    assert (s.job, s.cron, s.timezone, s.payload, s.rev, s.actor) == (
        "digest", "0 9 * * *", "Europe/Berlin", {"user": 42}, 1, "signup")
    assert now <= s.created_ms == s.updated_ms
    assert client.upsert_schedule("digest:user-42", job="digest", cron="0 8 * * *",
                                  timezone="Europe/Berlin", payload={"user": 42},
                                  actor="settings") == "changed"
    s2 = client.get_schedule("digest:user-42")
    assert (s2.cron, s2.rev, s2.actor, s2.created_ms) == ("0 8 * * *", 2, "settings",
                                                          s.created_ms)
    assert client.count_schedules() == client.count_schedules(job="digest") == 1
    assert client.count_schedules(job="report") == 0
    with pytest.raises(UnknownSchedule):
        client.get_schedule("digest:user-43")


def test_upsert_queues_the_first_fires_and_a_change_replaces_them(
        client: Client, r: redis.Redis) -> None:
    client.upsert_schedule("s", job="digest", every="30m", payload=[1])
    first = queued(r, "s")
    now = client.server_ms()
    assert 3 <= len(first) <= 5  # two hours of every 30 minutes, from now
    assert all(parse_fire(f)[0] == "digest" and parse_fire(f)[1] % 1_800_000 == 0
               and now < parse_fire(f)[1] <= now + 2 * 3_600_000 + 1000 for f in first)
    mark = r.zscore(K.schedule_marks, "s")
    assert mark is not None and parse_fire(first[-1])[1] <= mark
    # every 20 minutes instead: the old fires go, the new ones come
    assert client.upsert_schedule("s", job="digest", every="20m", payload=[1]) == "changed"
    second = queued(r, "s")
    assert not set(first) & set(second) - {f for f in first if parse_fire(f)[1] % 3_600_000 == 0}
    assert all(parse_fire(f)[1] % 1_200_000 == 0 for f in second)
    assert len(second) in (6, 7)
    # a payload change keeps the times (and so the fire ids)
    assert client.upsert_schedule("s", job="digest", every="20m", payload=[2]) == "changed"
    assert queued(r, "s") == second
    assert client.get_schedule("s").payload == [2]


def test_a_change_never_queues_again_a_fire_that_started_under_the_old_definition(
        client: Client, r: redis.Redis) -> None:
    # The caller plans the new definition from a clock read before the call; a fire due in
    # between may have been claimed already, and must not be queued a second time.
    client.upsert_schedule("s", job="digest", every="1s", payload=[1])
    old = client.get_schedule("s")
    read = client.server_ms()
    due = read - read % 1000 + 1000
    fid = fire_id("digest", due, schedule="s")
    claims = client.scripts.claim(K, "w", batch=10, lease_ms=60_000, now_ms=due).claimed
    assert fid in {c.fire_id for c in claims}
    changed = dataclasses.replace(old, payload=[2])
    res = client.scripts.schedule_set(K, "s", old.rev, r.zscore(K.schedule_marks, "s"),
                                      changed.content, "me", due + 5000, [],
                                      [due, due + 1000, due + 2000], now_ms=due + 3)
    assert res[0] == "changed"
    assert r.zscore(K.queue, fid) is None and r.zscore(K.working, fid) is not None
    assert {fire_id("digest", due + 1000, schedule="s"),
            fire_id("digest", due + 2000, schedule="s")} <= set(queued(r, "s"))


def test_a_schedule_sent_unread_is_created_only_where_nothing_is(
        client: Client, r: redis.Redis) -> None:
    client.upsert_schedule("s", job="digest", every="30m", payload=[1])
    s = client.get_schedule("s")
    mark = r.zscore(K.schedule_marks, "s")
    other = dataclasses.replace(s, payload=[2]).content
    now = client.server_ms()
    # there, with this definition: unchanged; with another: read it first (retry)
    assert client.scripts.schedule_set(K, "s", UNREAD, None, s.content, "me", now, [],
                                       []) == ("unchanged", 1)
    assert client.scripts.schedule_set(K, "s", UNREAD, None, other, "me", now, [],
                                       []) == ("retry", 1)
    # a mark of no schedule (as a read would see it) is not overwritten unread
    r.zadd(K.schedule_marks, {"t": 5})
    assert client.scripts.schedule_set(K, "t", UNREAD, None, other, "me", now, [],
                                       []) == ("retry", 0)
    assert client.scripts.schedule_set(K, "u", UNREAD, None, other, "me", now + 1, [],
                                       []) == ("created", 1)
    assert r.zscore(K.schedule_marks, "u") == now + 1
    assert client.get_schedule("s") == s and r.zscore(K.schedule_marks, "s") == mark
    # through the client: a batch of mostly new ones goes unread, a change among them
    # is read and made, its old fires unqueued
    old = queued(r, "s")
    assert client.upsert_schedules([{"id": "s", "job": "digest", "every": "20m"}] + [
        {"id": f"n{i}", "job": "digest", "every": "20m"} for i in range(5)]) == [
        "changed"] + ["created"] * 5
    assert client.get_schedule("s").rev == 2
    assert not set(old) & set(queued(r, "s")) - {f for f in old
                                                 if parse_fire(f)[1] % 3_600_000 == 0}
    # a batch of changes: the next is read first; a batch found new: the next goes unread
    ops = client._schedules
    assert ops.unread_first
    assert client.upsert_schedules([{"id": f"n{i}", "job": "digest", "every": "30m"}
                                    for i in range(5)]) == ["changed"] * 5
    assert not ops.unread_first
    assert client.upsert_schedules([{"id": f"m{i}", "job": "digest", "every": "30m"}
                                    for i in range(5)]) == ["created"] * 5
    assert ops.unread_first


def test_a_bulk_load_sent_unread_creates_only_what_is_not_there(
        client: Client, r: redis.Redis) -> None:
    ops = client._schedules
    daily = [{"id": f"d{i}", "job": "digest", "cron": f"{i} 3 * * *",
              "timezone": "Europe/Berlin", "payload": {"user": i}} for i in range(6)]
    assert client.upsert_schedules(daily[:2]) == ["created"] * 2
    made = {sid: (r.hget(K.schedules, sid), r.zscore(K.schedule_marks, sid))
            for sid in ("d0", "d1")}
    assert ops.unread_first
    # sent unread in one group: one there as given, one there otherwise, four new
    changed = {**daily[1], "payload": {"user": -1}}
    assert client.upsert_schedules([daily[0], changed] + daily[2:]) == [
        "unchanged", "changed"] + ["created"] * 4
    assert (r.hget(K.schedules, "d0"), r.zscore(K.schedule_marks, "d0")) == made["d0"]
    assert client.get_schedule("d1").payload == {"user": -1}
    assert client.get_schedule("d1").rev == 2
    for item in daily[2:]:
        s = client.get_schedule(item["id"])
        assert (s.cron, s.timezone, s.payload, s.rev) == (
            item["cron"], "Europe/Berlin", item["payload"], 1)
        mark = r.zscore(K.schedule_marks, item["id"])
        assert mark is not None and mark >= s.created_ms
    assert client.count_schedules(job="digest") == 6
    assert r.hget(K.schedule_counts, "digest") == "6"
    # all new: written as sent, one event for the created of the call
    more = [{"id": f"e{i}", "job": "digest", "every": "1h"} for i in range(3)]
    assert client.upsert_schedules(more) == ["created"] * 3
    assert r.hget(K.schedule_counts, "digest") == "9"
    latest = json.loads(r.lindex(K.events, 0))
    assert (latest["event"], latest["count"], latest["first"], latest["last"]) == (
        "schedules created", 3, "e0", "e2")


@pytest.mark.parametrize("actors", [("signup",), ("signup", "import")])
def test_a_bulk_call_stores_and_queues_what_each_schedule_plans(
        client: Client, r: redis.Redis, actors: tuple[str, ...]) -> None:
    # One actor: the rows with nothing to queue go list by list, the others (due soon,
    # paused) one by one in the same call; two actors: every row one by one.
    items: list[dict[str, object]] = []
    for i in range(40):
        item: dict[str, object] = {"id": f"mix:{i}", "job": "digest",
                                   "actor": actors[i % len(actors)], "payload": {"user": i}}
        if i % 7 == 0:
            item["every"] = "1m"  # fires before the next look: queued now
        else:
            item["cron"] = f"{i} {i % 24} * * *"
            item["timezone"] = ("UTC", "Europe/Berlin", "America/New_York")[i % 3]
        if i % 5 == 0:
            item["paused"] = True
        items.append(item)
    assert client.upsert_schedules(items) == ["created"] * len(items)
    assert r.hget(K.schedule_counts, "digest") == str(len(items))
    for item in items:
        sid = str(item["id"])
        s = client.get_schedule(sid)
        fields = {k: v for k, v in item.items() if k not in ("id", "job")}
        made = build(sid, job="digest", now_ms=s.created_ms, **fields)  # type: ignore[arg-type]
        assert (s.content, s.actor, s.rev) == (made.content, item["actor"], 1), sid
        dues, mark = plan_schedule(s, s.created_ms, s.created_ms + HORIZON_MS)
        # a paused one's mark counts from the batch's clock, read before the script's
        assert abs(r.zscore(K.schedule_marks, sid) - mark) <= (  # type: ignore[operator]
            5_000 if item.get("paused") else 0), sid
        expected = [fire_id("digest", due, schedule=sid) for due in dues]
        assert set(queued(r, sid)) <= set(expected), sid
        assert {fire_id("digest", due, schedule=sid) for due in dues
                if due > s.created_ms + 60_000} <= set(queued(r, sid)), sid
        if item.get("paused"):
            assert queued(r, sid) == [], sid
        elif "every" in item:
            assert len(queued(r, sid)) >= 100, sid  # two hours of them: no planner is live


def test_thousands_of_fires_are_queued_and_unqueued_in_one_call(
        client: Client, r: redis.Redis) -> None:
    # More fires than one command takes (lua/includes/bulk.lua sends them in slices).
    client.upsert_schedule("s", job="digest", every="1s", payload=[1])
    old = client.get_schedule("s")
    now = client.server_ms()
    dues = [now + 10_000 + i * 1000 for i in range(5000)]
    res = client.scripts.schedule_set(K, "s", old.rev, r.zscore(K.schedule_marks, "s"),
                                      dataclasses.replace(old, payload=[2]).content, "me",
                                      dues[-1], queued(r, "s"), dues, now_ms=now)
    assert res[0] == "changed"
    assert queued(r, "s") == [fire_id("digest", d, schedule="s") for d in dues]
    rev, more = client.get_schedule("s").rev, [dues[-1] + (i + 1) * 1000 for i in range(5000)]
    assert client.scripts.schedule_plan(K, [("s", rev, dues[-1], more[-1], more)]).added == 5000
    assert client.scripts.schedule_delete(K, "s", rev, more[-1], queued(r, "s")) == "deleted"
    assert queued(r, "s") == []


def test_an_every_second_schedule_holds_a_bounded_number_of_fires(
        client: Client, r: redis.Redis) -> None:
    client.upsert_schedule("fast", job="digest", every=timedelta(seconds=1))
    # MAX_AHEAD planned from the clock read before the script; a fire due by the time the
    # script runs is left out (a second may pass between, more on a busy machine).
    assert MAX_AHEAD - 10 < len(queued(r, "fast")) <= MAX_AHEAD


def test_delete_unqueues_and_says_whether_there_was_one(client: Client, r: redis.Redis) -> None:
    client.upsert_schedule("gone", job="digest", every="10m")
    client.upsert_schedule("stays", job="digest", every="10m")
    assert queued(r, "gone")
    assert client.delete_schedule("gone") is True
    assert queued(r, "gone") == [] and queued(r, "stays")
    assert r.zscore(K.schedule_marks, "gone") is None
    assert client.delete_schedule("gone") is False
    assert client.count_schedules(job="digest") == 1


def test_pause_and_resume_a_schedule(client: Client, r: redis.Redis) -> None:
    client.upsert_schedule("p", job="digest", every="15m")
    assert client.pause_schedule("p", actor="ops") == "changed"
    s = client.get_schedule("p")
    assert (s.paused, s.actor, s.rev) == (True, "ops", 2)
    assert client.pause_schedule("p") == "unchanged"
    assert client.resume_schedule("p") == "changed"
    assert client.get_schedule("p").paused is False
    with pytest.raises(UnknownSchedule):
        client.pause_schedule("nobody")


def test_listing_pages_through_without_reading_everything(client: Client) -> None:
    # More than a hash keeps in one compact piece (512 fields), which HSCAN reads at once.
    client.upsert_schedules([{"id": f"user:{i:03d}", "job": "digest", "cron": "0 9 * * *"}
                             for i in range(600)])
    client.upsert_schedule("other", job="report", every="1h")
    ids: list[str] = []
    cursor = None
    pages = 0
    while True:
        page = client.schedules(prefix="user:", cursor=cursor, limit=40)
        ids += [s.id for s in page.schedules]
        pages += 1
        if page.cursor is None:
            break
        cursor = page.cursor
    assert sorted(ids) == [f"user:{i:03d}" for i in range(600)]  # each once
    assert pages > 3
    assert [s.id for s in client.schedules(job="report", limit=1000).schedules] == ["other"]
    assert client.count_schedules() == 601
    with pytest.raises(BadSchedule, match="cursor"):
        client.schedules(cursor="nonsense")


def test_a_cursor_past_what_hscan_takes_is_a_bad_schedule_not_a_redis_error(
        client: Client) -> None:
    huge = f"0:{10**30}"
    with pytest.raises(BadSchedule, match=f"^cursor '{huge}': not one this listing gave$"):
        client.schedules(cursor=huge)


def test_two_clients_upserting_one_id_at_once_end_with_one_definition(
        client: Client, redis_url: str, r: redis.Redis) -> None:
    other = Client(redis_url)
    errors: list[BaseException] = []

    def upsert(c: Client, every: str) -> None:
        try:
            for _ in range(20):
                c.upsert_schedule("race", job="digest", every=every)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=upsert, args=(c, e))
               for c, e in ((client, "7m"), (other, "11m"))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    final = client.get_schedule("race")
    every = final.every_ms
    fires = queued(r, "race")
    assert fires and all(parse_fire(f)[1] % every == 0 for f in fires)  # type: ignore[operator]
    assert len(fires) == len(set(fires))


def test_the_planner_plans_schedules_by_their_marks_and_two_never_plan_twice(
        client: Client, r: redis.Redis, tmp_path: Path) -> None:
    client.upsert_schedules([{"id": f"d:{i}", "job": "digest", "cron": f"{i} 9 * * *"}
                             for i in range(30)] + [{"id": "fast", "job": "digest",
                                                     "every": "1s"}])
    before = set(r.zrange(K.queue, 0, -1))
    marks = dict(r.zrange(K.schedule_marks, 0, -1, withscores=True))
    now = client.server_ms()
    # A daily schedule is marked up to just before its next fire: not looked at per tick.
    assert all(marks[f"d:{i}"] > now + 2 * 3_600_000 or queued(r, f"d:{i}")
               for i in range(30))
    clock = FixedClock(now + 60_000)
    planners = [Planner(client.config.source, r, clock=clock)  # type: ignore[union-attr]
                for _ in range(2)]
    threads = [threading.Thread(target=p.tick) for p in planners]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    after = r.zrange(K.queue, 0, -1)
    assert len(after) == len(set(after))
    fast = [parse_fire(f)[1] for f in queued(r, "fast")]
    assert len(fast) > MAX_AHEAD - 60  # topped up, and every fire once
    assert fast == sorted(set(fast))
    assert set(before) - set(after) == set()  # nothing planned was dropped


def test_with_planners_live_an_upsert_queues_until_their_next_look_and_they_the_rest(
        client: Client, r: redis.Redis) -> None:
    start = client.server_ms()
    planners = [Planner(client.config.source, r, clock=FixedClock(start),  # type: ignore[union-attr]
                        tick=5) for _ in range(2)]
    for p in planners:
        p.tick()  # heartbeats: two live planners ticking every 5 s
    look = planner_stale_ms(5)  # by then both have surely looked at the schedules again
    before = client.server_ms()
    client.upsert_schedules([{"id": "minutely", "job": "digest", "every": "1m"},
                             {"id": "soon", "job": "digest", "every": "1s"},
                             {"id": "daily", "job": "digest", "cron": "0 9 * * *"}])
    after = client.server_ms()
    soon = [parse_fire(f)[1] for f in queued(r, "soon")]
    minutely = [parse_fire(f)[1] for f in queued(r, "minutely")]
    # A first fire within seconds is queued by the upsert; nothing past the planners' look.
    assert soon and soon[0] <= after + 2000 and before < soon[0]
    assert all(due <= after + look for due in soon + minutely + [
        parse_fire(f)[1] for f in queued(r, "daily")])
    assert len(soon) >= look // 1000 - 2
    first_left = (before + look) // 60_000 * 60_000 + 60_000  # the first minute past the reach
    assert minutely == [] or minutely == [first_left - 60_000]
    marks = dict(r.zrange(K.schedule_marks, 0, -1, withscores=True))
    assert marks["minutely"] >= first_left - 1 - (after - before)
    # One fire has run before the planners come: it is never queued again.
    due = soon[0]
    claimed = client.scripts.claim(K, "w", batch=100, lease_ms=60_000, now_ms=due).claimed
    ran = fire_id("digest", due, schedule="soon")
    assert ran in {c.fire_id for c in claimed}
    # Both planners at their next tick, at once: the rest queued in time, each fire once.
    at = after + 5000
    for p in planners:
        p.clock = FixedClock(at)
    threads = [threading.Thread(target=p.tick) for p in planners]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    upto = at + int(planners[0].horizon * 1000)
    minutely = [parse_fire(f)[1] for f in queued(r, "minutely")]
    assert minutely[0] <= first_left  # none missed, no gap, none twice
    assert minutely == list(range(minutely[0], upto + 1, 60_000))
    assert first_left > after  # queued before it is due
    soon = [parse_fire(f)[1] for f in queued(r, "soon")]
    assert ran not in queued(r, "soon") and r.zscore(K.working, ran) is not None
    assert soon == list(range(soon[0], soon[-1] + 1, 1000)) and soon[0] == due + 1000
    daily = next_fires(client.get_schedule("daily").spec, before, 1)[0]
    assert queued(r, "daily") == ([fire_id("digest", daily, schedule="daily")]
                                  if daily <= upto else [])


def test_upserts_in_batches_of_thousands(client: Client) -> None:
    outcomes = client.upsert_schedules(
        [{"id": f"bulk:{i}", "job": "digest", "cron": f"{i % 60} {i % 24} * * *",
          "timezone": ("UTC", "Europe/Berlin", "Asia/Tokyo")[i % 3], "payload": {"n": i}}
         for i in range(3000)])
    assert outcomes == ["created"] * 3000
    assert client.count_schedules(job="digest") == 3000
    assert client.get_schedule("bulk:1234").payload == {"n": 1234}


def test_stored_line_round_trips(client: Client, r: redis.Redis) -> None:
    start = datetime(2030, 5, 1, 9, tzinfo=UTC)
    client.upsert_schedule("rt", job="digest", every="90m", anchor=start, start=start,
                           end=start + timedelta(days=30), max_runs=10,
                           payload={"nested": [1, "two", None], "big": 2**60},
                           catch_up="all", starting_deadline="5m", jitter="10s",
                           overlap="forbid", paused=True, actor="a|b")
    s = parse_stored("rt", r.hget(K.schedules, "rt"))
    assert (s.every_ms, s.anchor_ms, s.max_runs, s.catch_up, s.starting_deadline_ms,
            s.jitter, s.overlap, s.paused, s.actor) == (
        5_400_000, int(start.timestamp() * 1000), 10, "all", 300_000, 10.0, "forbid", True,
        "a/b")
    assert s.payload == {"nested": [1, "two", None], "big": 2**60}
    assert fire_id("digest", 5, schedule="rt") == "digest@5!rt"


def test_a_schedule_stored_in_the_form_before_reads_plans_and_is_rewritten_by_a_change(
        client: Client, r: redis.Redis) -> None:
    # As a version before the short line wrote it: its line, its mark, its count.
    now = client.server_ms()
    created = now - 86_400_000
    line = (f'3|{created}|{created}|old-admin|digest|0||||'
            '{"cron":"0 9 * * *","timezone":"Europe/Berlin"}|{"user":42}')
    r.hset(K.schedules, "old:42", line)
    r.zadd(K.schedule_marks, {"old:42": now - 1})
    r.hset(K.schedule_counts, "digest", 1)
    s = client.get_schedule("old:42")
    assert (s.rev, s.created_ms, s.actor, s.cron, s.timezone, s.payload) == (
        3, created, "old-admin", "0 9 * * *", "Europe/Berlin", {"user": 42})
    assert [x.id for x in client.schedules(prefix="old:").schedules] == ["old:42"]
    # the planner's scripts read it: due, and planned
    (sid, mark, read), = client.scripts.schedule_due(K, now + 1, 0, 10)[0]
    due = next_fires(s.spec, now, 1)[0]
    assert client.scripts.schedule_plan(K, [(sid, 3, mark, due, [due])]).added == 1
    assert queued(r, "old:42") == [fire_id("digest", due, schedule="old:42")]
    assert read == line
    assert client.upsert_schedule("old:42", job="digest", cron="0 9 * * *",
                                  timezone="Europe/Berlin", payload={"user": 42}) == "unchanged"
    assert r.hget(K.schedules, "old:42") == line
    assert client.upsert_schedule("old:42", job="digest", cron="0 10 * * *",
                                  timezone="Europe/Berlin", payload={"user": 42},
                                  actor="new-admin") == "changed"
    assert not r.hget(K.schedules, "old:42").startswith(f"4|{created}|")  # the short form
    s = client.get_schedule("old:42")
    assert (s.rev, s.created_ms, s.actor, s.cron) == (4, created, "new-admin", "0 10 * * *")
    assert fire_id("digest", due, schedule="old:42") not in queued(r, "old:42")
    assert client.count_schedules(job="digest") == 1
    assert client.delete_schedule("old:42") is True
    assert client.count_schedules(job="digest") == 0


def test_schedules_of_one_stored_line_run_as_it_says_each_fire_of_its_job(
        client: Client, r: redis.Redis) -> None:
    # Schedules upserted in one call with one definition store one line: a fire of each runs
    # with its payload, and a fire of another job named by one of them (queued before the
    # schedule moved to its job now) is its removed schedule's.
    due = 4_102_444_800_000  # 2100-01-01, past any fire the upserts queue
    client.upsert_schedules([{"id": sid, "job": "digest", "cron": "0 9 * * *",
                              "payload": {"p": 1}} for sid in ("s1", "s2", "s3")])
    assert len({r.hget(K.schedules, sid) for sid in ("s1", "s2", "s3")}) == 1
    r.delete(K.queue)
    fires = [fire_id("digest", due, schedule="s1"), fire_id("report", due, schedule="s2"),
             fire_id("digest", due, schedule="s3")]
    r.zadd(K.queue, dict.fromkeys(fires, due))
    res = client.scripts.claim(K, "w", batch=3, lease_ms=60_000, now_ms=due)
    assert [(c.fire_id, c.payload) for c in res.claimed] == [(fires[0], {"p": 1}),
                                                              (fires[2], {"p": 1})]
    assert res.dropped == [(fires[1], "schedule removed")]


def test_catch_up_latest_runs_each_schedules_newest_fire_past_the_first_slice(
        client: Client, r: redis.Redis) -> None:
    # A claim of one splits its first slice alone; the fires past it are read for their
    # owner only: each schedule is its own owner, not its job.
    for sid in ("s1", "s2"):
        client.upsert_schedule(sid, job="digest", every="1s")
    now = max(min(parse_fire(f)[1] for f in queued(r, sid)) for sid in ("s1", "s2")) + 2000
    scan = r.zrangebyscore(K.queue, "-inf", now)
    assert len(scan) >= 6
    res = client.scripts.claim(K, "w", batch=1, lease_ms=60_000, scan_limit=10, now_ms=now)
    assert [c.fire_id for c in res.claimed] == [fire_id("digest", now, schedule="s1")]
    assert res.dropped == [(f, "catch_up latest") for f in scan if parse_fire(f)[1] < now]
    res = client.scripts.claim(K, "w", batch=1, lease_ms=60_000, scan_limit=10, now_ms=now)
    assert [c.fire_id for c in res.claimed] == [fire_id("digest", now, schedule="s2")]
