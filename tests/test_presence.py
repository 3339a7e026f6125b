"""When planners count as live, and how soon the live ones look at runtime schedules again:
what an upsert queues itself (cronsvc/client/schedules.py) follows from it."""

from __future__ import annotations

from cronsvc.presence import planner_stale_ms, planner_tick_s, planners_look_within_ms

NOW = 1_800_000_000_000


def test_the_live_planners_look_again_within_two_of_their_ticks_and_a_slack() -> None:
    assert planners_look_within_ms(NOW, []) is None
    # a planner silent past its allowance is gone: it looks at nothing
    assert planners_look_within_ms(NOW, [(NOW - planner_stale_ms(5) - 1, 5.0)]) is None
    assert planners_look_within_ms(NOW, [(NOW, 5.0)]) == planner_stale_ms(5) == 20_000
    # the slowest live planner decides: the fastest may be gone the next moment
    assert planners_look_within_ms(NOW, [(NOW - 1000, 5.0), (NOW - 100_000, 60.0),
                                         (NOW - 10**9, 600.0)]) == planner_stale_ms(60)


def test_a_heartbeat_without_a_tick_is_read_as_a_minute() -> None:
    assert planner_tick_s({"tick": 5}) == 5.0
    for info in (None, {}, {"tick": "5"}, {"tick": 0}, {"tick": -1}):
        assert planner_tick_s(info) == 60.0
