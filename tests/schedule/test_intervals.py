"""Interval schedules (`every`, `anchor`) and the bounds of any schedule (`start`, `end`,
`max_runs`): pure expansion, tables of exact instants."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from cronsvc.clock import dt_to_ms
from cronsvc.config.models import parse_config
from cronsvc.schedule.expand import Spec, explain, next_fires, occurrences_ms
from cronsvc.schedule.words import describe_schedule, schedule_text

H = 3_600_000
M = 60_000


def ms(text: str) -> int:
    return dt_to_ms(datetime.fromisoformat(text))


T0 = ms("2026-11-24T00:00:00+00:00")

CASES = [
    # (spec, window start, window end, the fires expected)
    (Spec(every_ms=90 * M), T0, T0 + 6 * H,
     [T0 + 90 * M, T0 + 3 * H, T0 + 270 * M, T0 + 6 * H]),
    # the window is (start, end]: a fire at its start is not in it
    (Spec(every_ms=H), T0, T0 + 2 * H, [T0 + H, T0 + 2 * H]),
    (Spec(every_ms=H, anchor_ms=T0 + 30 * M), T0, T0 + 2 * H, [T0 + 30 * M, T0 + 90 * M]),
    # an anchor in the future still places fires before it: anchor + k * every, k < 0 too
    (Spec(every_ms=H, anchor_ms=T0 + 100 * H + 15 * M), T0, T0 + H, [T0 + 15 * M]),
    # start is inclusive, end is inclusive
    (Spec(every_ms=H, start_ms=T0 + H, end_ms=T0 + 3 * H), T0 - H, T0 + 10 * H,
     [T0 + H, T0 + 2 * H, T0 + 3 * H]),
    (Spec(cron="0 * * * *", start_ms=T0 + H + 1, end_ms=T0 + 3 * H - 1), T0, T0 + 10 * H,
     [T0 + 2 * H]),
    # max_runs counts from start, whatever the window
    (Spec(every_ms=H, start_ms=T0, max_runs=3), T0 + 90 * M, T0 + 10 * H, [T0 + 2 * H]),
    (Spec(cron="0 9 * * *", timezone="Europe/Berlin", start_ms=T0, max_runs=2), T0, T0 + 96 * H,
     [T0 + 8 * H, T0 + 32 * H]),
    # max_runs and end: whichever comes first
    (Spec(every_ms=H, start_ms=T0, end_ms=T0 + 2 * H, max_runs=10), T0 - 1, T0 + 10 * H,
     [T0, T0 + H, T0 + 2 * H]),
    # no schedule at all: a job that runs only when triggered
    (Spec(), T0, T0 + 100 * H, []),
    # the window entirely past the end
    (Spec(every_ms=M, end_ms=T0), T0, T0 + H, []),
]


@pytest.mark.parametrize(("spec", "lo", "hi", "expected"), CASES)
def test_interval_and_bounded_fires(spec: Spec, lo: int, hi: int, expected: list[int]) -> None:
    assert occurrences_ms(spec, lo, hi) == expected


def test_jitter_shifts_interval_fires_like_cron_fires() -> None:
    spec = Spec(every_ms=H, name="spread", jitter=600.0)
    fires = occurrences_ms(spec, T0, T0 + 3 * H)
    assert len(fires) == 3
    offset = fires[0] - T0
    assert 0 < offset <= 600_000
    assert fires == [T0 + offset, T0 + H + offset, T0 + 2 * H + offset]


def test_fires_do_not_depend_on_the_window_they_are_asked_in() -> None:
    # Planners ask in windows of any size: the same fires, so the same ids, every time.
    spec = Spec(every_ms=7 * M, anchor_ms=T0 + 3 * M, start_ms=T0, max_runs=40)
    whole = occurrences_ms(spec, T0 - H, T0 + 10 * H)
    pieces = [f for lo in range(T0 - H, T0 + 10 * H, 13 * M)
              for f in occurrences_ms(spec, lo, lo + 13 * M)]
    assert pieces == whole
    assert len(whole) == 40


def test_next_and_explain_know_intervals_and_bounds() -> None:
    spec = Spec(every_ms=2 * H, start_ms=T0, max_runs=2)
    assert next_fires(spec, T0 - 1, 5) == [T0, T0 + 2 * H]
    fires = list(explain(spec, datetime.fromtimestamp((T0 - 1) / 1000, UTC),
                         datetime.fromtimestamp((T0 + 10 * H) / 1000, UTC)))
    assert [dt_to_ms(f.utc) for f in fires] == [T0, T0 + 2 * H]
    bounded_cron = Spec(cron="0 * * * *", start_ms=T0 + H, end_ms=T0 + 2 * H)
    fires = list(explain(bounded_cron, datetime.fromtimestamp(T0 / 1000, UTC),
                         datetime.fromtimestamp((T0 + 5 * H) / 1000, UTC)))
    assert [dt_to_ms(f.utc) for f in fires] == [T0 + H, T0 + 2 * H]


WORDS = [
    (Spec(every_ms=90 * M), "every 90m", "every 90 minutes"),
    (Spec(every_ms=H), "every 1h", "every hour"),
    (Spec(every_ms=2 * 86_400_000), "every 2d", "every 2 days"),
    (Spec(every_ms=1500), "every 1.5s", "every 1.5s"),
    (Spec(cron="*/5 * * * *", start_ms=T0, max_runs=1), "*/5 * * * *",
     "every 5 minutes, from 2026-11-24T00:00:00Z, at most 1 run"),
    (Spec(every_ms=H, anchor_ms=T0 + 30 * M, end_ms=T0 + 9 * H), "every 1h",
     "every hour from 2026-11-24T00:30:00Z, until 2026-11-24T09:00:00Z"),
    (Spec(), "", "when triggered (no schedule)"),
]


@pytest.mark.parametrize(("spec", "text", "words"), WORDS)
def test_schedules_in_words(spec: Spec, text: str, words: str) -> None:
    assert schedule_text(spec) == text
    assert describe_schedule(spec) == words


def test_the_file_takes_every_anchor_start_end_and_max_runs() -> None:
    config = parse_config("""\
jobs:
  ninety:
    every: 90m
    call: m:f
  bounded:
    cron: "0 9 * * *"
    timezone: Europe/Berlin
    start: 2026-12-01T00:00:00
    end: "2027-01-01T00:00:00+01:00"
    max_runs: 3
    call: m:f
  anchored:
    every: 1h
    anchor: 2026-01-01T00:30:00Z
    call: m:f
  manual:
    command: ["true"]
""", "s.yaml")
    ninety, bounded = config.jobs["ninety"], config.jobs["bounded"]
    assert ninety.every_ms == 90 * M and ninety.cron is None
    # a time without a zone is in the job's zone
    assert bounded.start_ms == ms("2026-11-30T23:00:00+00:00")
    assert bounded.end_ms == ms("2026-12-31T23:00:00+00:00")
    assert occurrences_ms(bounded, 0, ms("2027-06-01T00:00:00+00:00")) == [
        ms("2026-12-01T08:00:00+00:00"), ms("2026-12-02T08:00:00+00:00"),
        ms("2026-12-03T08:00:00+00:00")]
    assert config.jobs["anchored"].anchor_ms == ms("2026-01-01T00:30:00+00:00")
    assert occurrences_ms(config.jobs["manual"], 0, 2**42) == []
    # The published spec of a plain cron job keeps its three fields, so upgrading
    # changes no job's digest (and unqueues nothing).
    plain = parse_config("jobs:\n  p:\n    cron: '* * * * *'\n    call: m:f\n", "s.yaml")
    assert plain.jobs["p"].spec == {"cron": "* * * * *", "timezone": "UTC", "jitter": 0.0}
    assert ninety.spec == {"cron": None, "timezone": "UTC", "jitter": 0.0, "every_ms": 90 * M}
    assert Spec.from_published("ninety", ninety.spec) == ninety.schedule
