"""Many runtime schedules checked and first planned fast: what a batch upsert does per item.

A batch repeats a few shapes: a daily or hourly cron in a handful of zones, an interval.
So a cron, a zone and an interval are checked once per distinct value, and the fires of a
plain schedule (no bounds, anchor, jitter or calendar) are expanded once per distinct
``when`` over a window of a day and more, then read off for every schedule of that
``when`` (:class:`FirstFires`). An item of another shape, or one that fails a check, goes
through :func:`cronsvc.schedule.runtime.build`, so its error is the same word for word.
"""

from __future__ import annotations

import gc
from bisect import bisect_right
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, NamedTuple

from cronsvc.errors import ScheduleError
from cronsvc.schedule.expand import DAY_MS, Spec, next_fires, occurrences_ms, zone
from cronsvc.schedule.fields import parse
from cronsvc.schedule.runtime import (
    CATCH_UP,
    MAX_AHEAD,
    MAX_PAYLOAD_BYTES,
    OVERLAP,
    REVISIT_MS,
    SCHEDULE_ID,
    RuntimeSchedule,
    actor_of,
    compact_when,
    content_of,
    every_ms_of,
    plan_schedule,
    policy_of,
    stored_json,
)

#: The fields of an item the fast path takes; an item with any other goes through build().
_PLAIN = frozenset({"id", "job", "cron", "every", "timezone", "payload", "paused", "actor",
                    "catch_up", "overlap"})
#: Distinct ``when`` kept at most (a batch of a million daily crons in 20 zones has 28,800).
_KEPT = 100_000


@contextmanager
def collector_held() -> Iterator[None]:
    """Python's cycle collector held off for one batch. A batch makes thousands of short-lived
    tuples and lists: each 700 of them the collector walks the young objects, and now and
    then every object the caller holds (a million items waiting for their turn: half a
    second). Nothing of a batch lives in a cycle, so the collector has nothing to find in
    it; its count falls back as the batch's objects go. Left as it was if it was off (the
    caller's choice), and on again after, even on an error."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


class Shape:
    """A plain (job, cron, every, timezone) checked: its stored when, its spec, what the
    definition of a schedule of it with the job's policy starts with (its payload
    follows), and once planned, ``quiet``: (lo, fire) with no fire in (lo, fire), as
    :attr:`FirstFires.nexts` says of its when (kept here too: a batch's rows reach it
    without a look-up in a dict of thousands)."""

    __slots__ = ("when", "spec", "start", "quiet")

    def __init__(self, when: str, spec: Spec, start: str) -> None:
        self.when, self.spec, self.start = when, spec, start
        self.quiet: tuple[int, int] | None = None


class Row(NamedTuple):
    """One schedule to set, as stored: its line after ``actor``, and how it fires."""

    id: str
    job: str
    content: str
    actor: str
    paused: bool
    when: str  # the stored when of a plain schedule ("" for another shape)
    spec: Spec | None  # a plain schedule's
    schedule: RuntimeSchedule | None  # the whole schedule of another shape
    shape: Shape | None = None  # a plain schedule's
    #: Its new mark when it queues nothing up to the planners' next look, as its shape's
    #: quiet window says at the check (None: :meth:`FirstFires.plan` says)
    mark: int | None = None


def row_of(s: RuntimeSchedule) -> Row:
    """The row of a schedule built whole."""
    return Row(s.id, s.job, s.content, s.actor, s.paused, "", None, s)


#: The shape of each plain (job, cron, every, timezone) checked so far.
Whens = dict[tuple[Any, Any, Any, Any], Shape]


def quiet_mark(quiet: tuple[int, int] | None, paused: bool, now: int, until: int
               ) -> int | None:
    """The new mark of a schedule whose ``when`` has no fire in ``quiet`` = (lo, fire),
    planned from ``now`` up to ``until``: ``fire - 1`` when that plan queues nothing;
    None when a plan must say (no window known, ``now`` or ``until`` outside it, paused)."""
    if quiet is None or paused or quiet[0] > now or until >= quiet[1]:
        return None
    return quiet[1] - 1


class Rows:
    """Items to rows: plain ones checked here against what ``whens`` holds (kept from
    batch to batch), the others (and any that fails a check here) by ``slow``, which
    raises the located error. Given the batch's clock ``now`` and ``until`` (up to when
    its first fires are queued), a plain row whose shape was planned before and has no
    fire in (now, until] gets its new mark here, while its shape is at hand
    (:attr:`Row.mark`, what :meth:`FirstFires.quiet_marks` would say)."""

    def __init__(self, jobs: set[str], actor: str,
                 slow: Callable[[dict[str, Any]], RuntimeSchedule], whens: Whens,
                 now: int | None = None, until: int | None = None) -> None:
        self.jobs, self.slow, self.specs = jobs, slow, whens
        self.default_actor = actor_of(actor)
        # without a clock no window holds: lo <= -1 never does
        self.now, self.until = (-1, 0) if now is None or until is None else (now, until)

    def row(self, item: Mapping[str, Any]) -> Row:
        return self.rows((item,))[0]

    def rows(self, items: Iterable[Mapping[str, Any]]) -> list[Row]:
        """The row of each item, in order (one loop: a batch's hot path)."""
        out: list[Row] = []
        add = out.append
        specs, jobs, default_actor, when_of = self.specs, self.jobs, self.default_actor, self._when
        now, until = self.now, self.until
        plain, valid_id, new = _PLAIN.issuperset, SCHEDULE_ID.fullmatch, tuple.__new__
        job: Any
        for item in items:
            if not plain(item):
                add(row_of(self.slow(dict(item))))
                continue
            get = item.get
            sid, job, every, catch_up, overlap, payload, actor = (
                get("id"), get("job"), get("every"), get("catch_up"), get("overlap"),
                get("payload"), get("actor"))
            try:
                known = (type(sid) is str and type(job) is str and job in jobs
                         and (actor is None or type(actor) is str)  # else build() says so
                         and type(every) is not bool  # True == 1
                         and valid_id(sid) is not None and (
                             specs.get(key := (job, get("cron"), every, get("timezone", "UTC")))
                             or when_of(*key)))
                text = None if not known or (catch_up is not None and catch_up not in CATCH_UP) or (
                    overlap is not None and overlap not in OVERLAP) else (
                    "" if payload is None else stored_json(payload))
            except (TypeError, ValueError):  # not hashable, or not JSON: build() says so
                text = None
            if text is None or (len(text) > MAX_PAYLOAD_BYTES // 4
                                and len(text.encode()) > MAX_PAYLOAD_BYTES):
                add(row_of(self.slow(dict(item))))
                continue
            shape: Shape = known  # type: ignore[assignment]
            paused = bool(get("paused"))
            quiet = shape.quiet
            add(new(Row, (sid, job, content_of(job, policy_of(paused, catch_up, None, overlap),
                                                shape.when, text)
                          if paused or catch_up or overlap else shape.start + text,
                          actor_of(actor) if actor else default_actor, paused, shape.when,
                          shape.spec, None, shape, quiet_mark(quiet, paused, now, until))))
        return out

    def _when(self, job: str, cron: Any, every: Any, timezone: Any) -> Shape | None:
        """The shape of a plain schedule not met before, checked."""
        if type(timezone) is not str or (cron is None) == (every is None):
            return None
        try:
            if cron is not None:
                if type(cron) is not str:
                    return None
                parse(cron)  # checks it as validate_cron does, and is what expanding reads
            zone(timezone)
            every_ms = None if every is None else every_ms_of(every)
        except (ValueError, ScheduleError):  # build() says what is wrong
            return None
        if len(self.specs) >= _KEPT:
            self.specs.clear()
        when = compact_when(cron, every_ms, timezone)
        known = self.specs[job, cron, every, timezone] = Shape(
            when, Spec(cron=cron, timezone=timezone, every_ms=every_ms),
            content_of(job, "", when, ""))  # the payload is last
        return known


#: How long after it was expanded a window still serves (the clock moves on meanwhile).
_SLACK_MS = 3_600_000


class FirstFires:
    """The first fires of rows, the fires of each plain ``when`` expanded once for a window
    of ``horizon_ms`` (the furthest a plan reaches) and a day past it, plus the next fire
    beyond (what :func:`cronsvc.schedule.runtime.plan_window` returns, read off a sorted
    list)."""

    def __init__(self, horizon_ms: int) -> None:
        self.horizon_ms = horizon_ms
        self.windows: dict[str, tuple[int, int, list[int]]] = {}
        #: Per plain ``when``: (lo, fire) where no fire is in (lo, fire): a plan from
        #: ``after_ms`` in [lo, fire) up to before ``fire`` queues nothing, and its mark is
        #: ``fire - 1`` (the callers' shortcut for most rows).
        self.nexts: dict[str, tuple[int, int]] = {}

    def quiet_marks(self, rows: Sequence[Row], now: int, until: int) -> list[int | None]:
        """The new mark of each row that queues nothing in (now, until], by what
        :attr:`nexts` knows (most rows of a bulk load, once their ``when`` was planned):
        its next fire less 1; None where :meth:`plan` must say (a paused row too). A row's
        own :attr:`Row.mark` (made for this ``now`` and ``until``) is taken as it is."""
        nexts = self.nexts
        return [mark if (mark := row.mark) is not None else quiet_mark(
                    row.shape.quiet if row.shape else nexts.get(row.when), row.paused, now, until)
                for row in rows]

    def plan(self, row: Row, after_ms: int, until_ms: int,
             max_ahead: int = MAX_AHEAD) -> tuple[list[int], int]:
        """(dues, new mark) of ``row`` in (after_ms, until_ms], ``until_ms`` at most
        ``horizon_ms`` past ``after_ms``."""
        until = after_ms + self.horizon_ms
        if until_ms < until:
            until = until_ms
        spec = row.spec
        if row.paused:
            return [], until + REVISIT_MS
        if spec is None:
            assert row.schedule is not None
            return plan_schedule(row.schedule, after_ms, until, max_ahead)
        window = self.windows.get(row.when)
        if window is None or not window[0] <= after_ms <= window[0] + _SLACK_MS:
            hi = after_ms + self.horizon_ms + DAY_MS + _SLACK_MS
            window = (after_ms, hi, occurrences_ms(spec, after_ms, hi))
            if len(self.windows) >= _KEPT:
                self.windows.clear()
                self.nexts.clear()
            self.windows[row.when] = window
        fires = window[2]
        last = bisect_right(fires, until)
        first = bisect_right(fires, after_ms, 0, last)
        if first == last and last < len(fires):  # nothing due yet (most): the next is in sight
            quiet = self.nexts[row.when] = (
                max(window[0], fires[first - 1] if first else window[0]), fires[last])
            if row.shape is not None:
                row.shape.quiet = quiet
            return [], fires[last] - 1
        dues = fires[first:last]
        if len(dues) > max_ahead:
            dues = dues[:max_ahead]
            return dues, dues[-1]
        # the next fire: in the window, or (a schedule firing less than daily) past it
        upcoming = fires[last:last + 1] or next_fires(spec, window[1], 1)
        return dues, (upcoming[0] - 1 if upcoming else until + REVISIT_MS)
