"""The batch path of runtime schedules (cronsvc/schedule/upserts.py) makes what build() and
plan_window make, item by item, and the stored line reads back in both of its forms."""

from __future__ import annotations

import gc
import json
import re
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from cronsvc.errors import BadSchedule
from cronsvc.schedule.runtime import (
    RuntimeSchedule,
    build,
    parse_stored,
    plan_schedule,
    stored_json,
)
from cronsvc.schedule.upserts import FirstFires, Rows, Whens, collector_held

HORIZON = 2 * 3_600_000
JOBS = {"digest", "report"}


def ms(text: str) -> int:
    return int(datetime.fromisoformat(text).timestamp() * 1000)


def slow(now: int) -> Any:
    def made(item: dict[str, Any]) -> RuntimeSchedule:
        sid, job = item.pop("id"), item.pop("job")
        item.setdefault("actor", "me")
        return build(sid, job=job, now_ms=now, **item)
    return made


ITEMS: list[dict[str, Any]] = [
    {"id": "a", "job": "digest", "cron": "30 9 * * *", "timezone": "Europe/Berlin",
     "payload": {"user": 1}},
    {"id": "b", "job": "digest", "cron": "0 * * * *", "payload": "naïve ☃"},
    {"id": "c", "job": "digest", "cron": "0 2 * * *", "timezone": "America/New_York"},
    {"id": "d", "job": "digest", "cron": "30 2 * * *", "timezone": "Europe/Berlin"},
    {"id": "e", "job": "digest", "every": "90m", "timezone": "Asia/Kolkata", "paused": True},
    {"id": "f", "job": "report", "every": 60, "catch_up": "latest", "overlap": "forbid",
     "actor": "x|y"},
    {"id": "g", "job": "digest", "every": timedelta(seconds=1)},
    {"id": "h", "job": "digest", "cron": "0 9 * * 1", "timezone": "Australia/Sydney",
     "payload": [1, 2.5, None]},
    {"id": "i", "job": "digest", "cron": "*/10 * * * * *", "timezone": "Etc/GMT+5"},
    {"id": "j", "job": "digest", "cron": "0 12 * * *", "timezone": "Asia/Kathmandu",
     "starting_deadline": "5m"},  # not plain: build() makes it
    {"id": "k", "job": "digest", "cron": "@daily", "start": "2026-06-01T00:00:00+00:00",
     "max_runs": 3},
]
# Times around the DST changes of Berlin and New York, and a plain day.
NOWS = [ms("2026-03-29T00:40:00+00:00"), ms("2026-11-01T05:10:00+00:00"),
        ms("2026-10-25T00:00:00+00:00"), ms("2026-07-14T13:37:00+00:00")]


@pytest.mark.parametrize("now", NOWS)
def test_a_batch_row_and_its_first_fires_are_what_build_makes(now: int) -> None:
    rows = Rows(JOBS, "me", slow(now), Whens())
    fires = FirstFires(HORIZON)
    for later in (0, 1_800_000, 3_500_000):  # a window expanded once serves the next hour
        for item in ITEMS:
            row = rows.row(item)
            s = slow(now)(dict(item))
            assert (row.id, row.job, row.content, row.actor, row.paused) == (
                s.id, s.job, s.content, s.actor, s.paused), item
            for until in (now + later + 150_000, now + later + HORIZON):
                assert fires.plan(row, now + later, until) == plan_schedule(
                    s, now + later, until), (item, later, until)


@pytest.mark.parametrize("now", NOWS)
def test_the_shortcut_of_a_plan_that_queues_nothing_is_the_plan(now: int) -> None:
    rows = Rows(JOBS, "me", slow(now), Whens())
    fires = FirstFires(HORIZON)
    seen = 0
    for later in (0, 1_800_000, 3_500_000, 5_000_000):
        for item in ITEMS:
            row = rows.row(item)
            fires.plan(row, now + later, now + later + 150_000)
            if row.when not in fires.nexts:
                continue
            lo, fire = fires.nexts[row.when]
            assert lo < fire
            for after in (lo, (lo + fire) // 2, fire - 1):
                for until in (after, fire - 1):
                    assert plan_schedule(slow(now)(dict(item)), after, until) == ([], fire - 1)
                    seen += 1
    assert seen > 0


@pytest.mark.parametrize("now", NOWS)
def test_a_mark_read_off_at_the_check_is_the_plan(now: int) -> None:
    fires = FirstFires(HORIZON)
    whens = Whens()
    for item in ITEMS:  # the shapes planned once, as an earlier batch would
        fires.plan(Rows(JOBS, "me", slow(now), whens).row(item), now, now + 150_000)
    seen = 0
    for later in (0, 60_000, 1_800_000, 3_500_000):
        for reach in (150_000, HORIZON):
            at, until = now + later, now + later + reach
            rows = Rows(JOBS, "me", slow(now), whens, at, until).rows(ITEMS)
            marks = fires.quiet_marks(rows, at, until)
            for item, row, mark in zip(ITEMS, rows, marks, strict=True):
                if row.mark is not None:
                    assert mark == row.mark
                    assert plan_schedule(slow(now)(dict(item)), at, until) == ([], row.mark)
                    seen += 1
    assert seen > 0


def test_an_item_a_check_here_refuses_gets_the_error_build_gives() -> None:
    rows = Rows(JOBS, "me", slow(0), Whens())
    for item, message in (
            ({"id": "x", "job": "digest", "cron": "61 * * * *"}, "cron: '61 * * * *'"),
            ({"id": "x", "job": "digest", "every": True}, "every: True"),
            ({"id": "x", "job": "digest", "cron": "0 9 * * *", "timezone": "Mars/Base"},
             "timezone: unknown time zone"),
            ({"id": "x", "job": "digest", "cron": "0 9 * * *", "payload": float("nan")},
             "payload: not JSON"),
            ({"id": "x", "job": "digest", "every": "1m", "catch_up": "some"}, "catch_up"),
            ({"id": "x", "job": "digest", "every": "1m", "actor": 7}, "actor: 7"),
            ({"id": "x", "job": "digest", "every": "1m", "actor": ["me"]}, "actor: ['me']")):
        with pytest.raises(BadSchedule, match=re.escape(f"schedule 'x': {message}")):
            rows.row(item)
        with pytest.raises(BadSchedule, match=re.escape(f"schedule 'x': {message}")):
            rows.rows([{"id": "ok", "job": "digest", "every": "1m"}, item])
    rows.row({"id": "x", "job": "digest", "every": 1})  # True is not the every of 1 s
    with pytest.raises(BadSchedule, match="every: True"):
        rows.row({"id": "x", "job": "digest", "every": True})


def test_the_stored_line_is_short_and_the_form_before_still_reads() -> None:
    s = build("digest:user-42", job="digest", now_ms=ms("2026-11-25T09:00:00+00:00"),
              cron="0 9 * * *", timezone="Europe/Berlin", payload={"user": 42},
              actor="signup")
    assert s.stored() == '0|mwvw7mo0.|signup|digest||0 9 * * *;E/Berlin|{"user":42}'
    assert parse_stored(s.id, s.stored()) == s
    before = ('3|1764061200000|1764064800000|signup|digest|1|latest|300000|forbid|'
              '{"cron":"0 9 * * *","timezone":"Europe/Berlin"}|{"user":42}')
    old = parse_stored("digest:user-42", before)
    assert (old.rev, old.created_ms, old.updated_ms, old.paused, old.catch_up,
            old.starting_deadline_ms, old.overlap, old.cron, old.timezone, old.payload) == (
        3, 1764061200000, 1764064800000, True, "latest", 300_000, "forbid", "0 9 * * *",
        "Europe/Berlin", {"user": 42})
    # rewritten in the short form, created kept apart from updated
    assert old.stored() == ('3|mieemv40.miechpc0|signup|digest|plF300000|0 9 * * *;E/Berlin|'
                            '{"user":42}')
    assert parse_stored(old.id, old.stored()) == old
    for line in ("3|.|a|digest||0 9 * * *|", "3|abc.|a|digest|zz|0 9 * * *|",
                 "3|abc.|a|digest||~soon|", "nonsense"):
        with pytest.raises(ValueError, match="not a stored schedule"):
            parse_stored("s", line)


def test_a_schedule_with_bounds_keeps_them_all() -> None:
    start = datetime(2030, 5, 1, 9, tzinfo=UTC)
    s = build("rt", job="digest", now_ms=NOWS[0], every="90m", anchor=start, start=start,
              max_runs=10, jitter="10s", timezone="Pacific/Auckland")
    assert parse_stored("rt", s.stored()) == s
    assert '"timezone":"Pacific/Auckland"' in s.stored()


@pytest.mark.parametrize("payload", [
    {"user": 42}, {"user": -(2**70)}, {"naïve ☃": "line\nbreak \"quoted\" é"}, {"u": ""},
    {"u": True}, {"u": None}, {"u": 1.5}, {"u": [1]}, {1: 2}, {"b": 1, "a": 2}, {}])
def test_a_payload_is_stored_as_the_json_encoder_writes_it(payload: dict[Any, Any]) -> None:
    # one key with a text or whole number takes a shorter way: the same text
    assert stored_json(payload) == json.dumps(payload, separators=(",", ":"),
                                              sort_keys=True, allow_nan=False)


def test_a_batch_holds_the_cycle_collector_off_and_gives_it_back_as_it_was() -> None:
    assert gc.isenabled()
    with pytest.raises(RuntimeError), collector_held():
        assert not gc.isenabled()
        raise RuntimeError("a batch that fails")
    assert gc.isenabled()
    gc.disable()
    try:
        with collector_held():
            assert not gc.isenabled()
        assert not gc.isenabled()  # the caller's choice stands
    finally:
        gc.enable()
