"""Expansion of a schedule into fire instants: a cron expression, or an interval.

Pure: every function takes its window; nothing here reads the clock.

A schedule is a cron expression in a zone (``cron``) or a fixed interval
(``every``: fires at ``anchor + k * every``, the anchor by default the Unix epoch, so
fire ids stay stable), or neither (a job that runs only when triggered). Either may be
bounded: no fire before ``start`` or after ``end``, and none after the ``max_runs``-th
fire at or after ``start``.

Fires are found on the job's local wall clock (croniter parses the expression,
:mod:`cronsvc.schedule.fields` turns it into sets) and each wall time is mapped to
instants with :mod:`zoneinfo` (``fold=0``/``fold=1``). Daylight saving time
follows cronie:

- a *fixed-time* job (minute and hour fields both not starting with ``*``, five
  fields) runs a slot that falls into a skipped interval once, at the
  transition instant, and a slot in a repeated interval once, in the first pass;
- any other job follows the wall clock: skipped slots do not run, repeated
  slots run in both passes. Expressions with a seconds field always do.

Jitter: each job's fires are shifted by a fixed offset, ``stable_hash(name) %
(jitter_ms + 1)`` ms, so a fire keeps its id across planners and restarts. The
returned instants include that offset and the window applies to them.
"""

from __future__ import annotations

import functools
from bisect import bisect_left, bisect_right
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta, tzinfo
from itertools import islice
from typing import Protocol
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronsvc.errors import ScheduleError, did_you_mean
from cronsvc.keys import stable_hash
from cronsvc.schedule.calendars import quiet, skipped
from cronsvc.schedule.fields import ALIASES, CronFields, normalize_cron, parse, validate_cron

__all__ = ["ALIASES", "Fire", "JobLike", "Spec", "explain", "jitter_ms", "normalize_cron",
           "occurrences", "occurrences_ms", "upcoming", "validate_cron", "zone"]

DAY_MS = 86_400_000
_EPOCH = datetime(1970, 1, 1)
_EPOCH_UTC = _EPOCH.replace(tzinfo=UTC)
_EPOCH_ORDINAL = _EPOCH.toordinal()
_MS = timedelta(milliseconds=1)
_MAX_CHUNK_MS = 32 * DAY_MS


class JobLike(Protocol):
    """What expansion reads from a job (``cronsvc.config.models.Job`` has it all)."""

    @property
    def name(self) -> str: ...
    @property
    def cron(self) -> str | None: ...
    @property
    def timezone(self) -> str: ...
    @property
    def jitter(self) -> float: ...
    @property
    def every_ms(self) -> int | None: ...
    @property
    def anchor_ms(self) -> int | None: ...
    @property
    def start_ms(self) -> int | None: ...
    @property
    def end_ms(self) -> int | None: ...
    @property
    def max_runs(self) -> int | None: ...


#: The fields of a published schedule (``Keys.specs``), in the order they are written.
SPEC_FIELDS = ("cron", "timezone", "jitter", "every_ms", "anchor_ms", "start_ms", "end_ms",
               "max_runs")


@dataclass(frozen=True)
class Spec:
    """A bare schedule: what :class:`JobLike` says, as plain values (the CLI, the
    published form a planner and ``cronsvc ls`` read back, tests)."""

    cron: str | None = None
    timezone: str = "UTC"
    name: str = ""
    jitter: float = 0.0
    every_ms: int | None = None
    anchor_ms: int | None = None
    start_ms: int | None = None
    end_ms: int | None = None
    max_runs: int | None = None
    calendar: tuple[str, ...] = ()  # days without fires (cronsvc.schedule.calendars)

    @classmethod
    def of(cls, job: JobLike) -> Spec:
        """The schedule of ``job``."""
        return cls(name=job.name, calendar=tuple(getattr(job, "calendar", ())),
                   **{f: getattr(job, f) for f in SPEC_FIELDS})

    def published(self) -> dict[str, object]:
        """The JSON object a planner publishes: the fields that decide the fire times,
        those not set left out (so the digest of a plain cron job never changes)."""
        out: dict[str, object] = {"cron": self.cron, "timezone": self.timezone,
                                  "jitter": self.jitter}
        for f in SPEC_FIELDS[3:]:
            if getattr(self, f) is not None:
                out[f] = getattr(self, f)
        if self.calendar:
            out["calendar"] = list(self.calendar)
        return out

    @classmethod
    def from_published(cls, name: str, spec: dict[str, object]) -> Spec:
        """A published schedule read back (unknown fields of a newer version ignored)."""
        known = {f: spec[f] for f in SPEC_FIELDS if spec.get(f) is not None}
        known["jitter"] = float(known.get("jitter") or 0)  # type: ignore[arg-type]
        known.setdefault("timezone", "UTC")
        calendar = spec.get("calendar")
        return cls(name=name, calendar=tuple(calendar) if isinstance(calendar, list) else (),
                   **known)  # type: ignore[arg-type]


@dataclass(frozen=True)
class Fire:
    """One slot of a schedule, as ``cronsvc next`` shows it.

    ``runs`` is False for a slot a DST gap removes from a wall-clock job: it is
    shown (at the transition instant) so nobody wonders where it went.
    """

    utc: datetime
    local: datetime
    note: str | None = None
    runs: bool = True


@functools.cache
def zone(key: str) -> tzinfo:
    """The time zone named ``key`` (an IANA name); ScheduleError if there is none."""
    try:
        return ZoneInfo(key)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        from zoneinfo import available_timezones

        hint = did_you_mean(key, sorted(available_timezones()))
        raise ScheduleError(f"unknown time zone {key!r}{hint}") from None


def jitter_ms(job: JobLike) -> int:
    """The job's fixed offset in ms: the same in every process, at most ``jitter`` seconds."""
    most = round(job.jitter * 1000)
    return stable_hash(job.name) % (most + 1) if most > 0 else 0


@dataclass(frozen=True)
class _Day:
    year: int
    month: int
    day: int
    base_ms: int  # local midnight read as if it were UTC
    offset_ms: int | None  # None: the offset changes during the day
    min_offset_ms: int
    max_offset_ms: int
    # on a day with one change: the instant and the offsets around it (else None)
    change: tuple[int, int, int] | None = None


def _offset_ms(tz: tzinfo, wall: datetime) -> int:
    return tz.utcoffset(wall) // _MS  # type: ignore[operator]


def _offset_at(tz: tzinfo, s: int) -> int:
    return datetime.fromtimestamp(s, tz).utcoffset() // _MS  # type: ignore[operator]


def _transition_ms(tz: tzinfo, before_ms: int, after_ms: int) -> int:
    """First instant in (before_ms, after_ms] whose offset differs from before_ms's."""
    lo, hi = before_ms // 1000, -(-after_ms // 1000)
    old = _offset_at(tz, lo)
    while hi - lo > 1:  # tz offsets change on whole seconds
        mid = (lo + hi) // 2
        if _offset_at(tz, mid) == old:
            lo = mid
        else:
            hi = mid
    return hi * 1000


@functools.lru_cache(maxsize=1 << 16)
def _day(key: str, ordinal: int) -> _Day:
    tz = zone(key)
    midnight = datetime.fromordinal(ordinal)
    after = midnight + timedelta(days=1)
    # both folds at both ends: a transition at either midnight also makes the day special
    offsets = {_offset_ms(tz, w.replace(fold=f)) for w in (midnight, after) for f in (0, 1)}
    base = (ordinal - _EPOCH_ORDINAL) * DAY_MS
    low, high = min(offsets), max(offsets)
    if low == high:
        return _Day(midnight.year, midnight.month, midnight.day, base, low, low, high)
    first, last = base - high - 1000, base + DAY_MS - low
    old, new = _offset_at(tz, first // 1000), _offset_at(tz, last // 1000)
    change = (_transition_ms(tz, first, last), old, new) if old != new else None
    return _Day(midnight.year, midnight.month, midnight.day, base, None, low, high, change)


def _label(t: datetime) -> str:
    return t.strftime("%H:%M:%S" if t.second else "%H:%M")


def _instants(f: CronFields, tz: tzinfo, wall_ms: int) -> list[tuple[int, str | None, bool]]:
    """(instant ms, note, runs) for one local wall time, per the DST rule."""
    wall = _EPOCH + timedelta(milliseconds=wall_ms)
    first = wall_ms - _offset_ms(tz, wall)
    second = wall_ms - _offset_ms(tz, wall.replace(fold=1))
    if first == second:
        return [(first, None, True)]
    if first < second:  # the wall time happens twice
        if f.fixed:
            return [(first, "repeated hour: runs in the first pass only", True)]
        return [(first, "repeated hour: first pass", True),
                (second, "repeated hour: second pass", True)]
    # fold=0 reads the wall time with the earlier offset: it lies beyond the gap
    moved = _transition_ms(tz, second, first)
    if not f.fixed:
        return [(moved, f"skipped: {_label(wall)} does not exist (DST gap)", False)]
    at = datetime.fromtimestamp(moved / 1000, tz)
    return [(moved, f"moved: {_label(wall)} does not exist (DST gap), "
                    f"runs at {_label(at)} {at.tzname()}", True)]


def _mixed_day(f: CronFields, tz: tzinfo, d: _Day, lo: int, hi: int,
               slots: Sequence[int] | None = None) -> Iterator[tuple[int, str | None, bool]]:
    """Slots of a day whose offset changes, mapped one by one; only those in (lo, hi]."""
    slots = f.slots_ms if slots is None else slots
    # a slot's instant lies within [wall - max offset, wall - min offset]
    first = bisect_right(slots, lo - d.base_ms + d.min_offset_ms - 1)
    last = bisect_right(slots, hi - d.base_ms + d.max_offset_ms)
    for slot in slots[first:last]:
        for item in _instants(f, tz, d.base_ms + slot):
            if lo < item[0] <= hi:
                yield item


def _changing_day(f: CronFields, tz: tzinfo, d: _Day, lo: int, hi: int) -> list[int]:
    """Fires of a day with a DST change: only slots near the change are mapped one by one."""
    if d.change is None:  # more than one change that day: map everything
        return [u for u, _, runs in _mixed_day(f, tz, d, lo, hi) if runs]
    at, before, after = d.change
    slots = f.slots_ms
    # wall times outside [change + smaller offset, change + larger offset) are unambiguous
    cut1 = bisect_left(slots, at + min(before, after) - d.base_ms)
    cut2 = bisect_left(slots, at + max(before, after) - d.base_ms)
    out = _uniform(slots[:cut1], d.base_ms - before, lo, hi)
    out.extend(u for u, _, runs in _mixed_day(f, tz, d, lo, hi, slots[cut1:cut2]) if runs)
    out.extend(_uniform(slots[cut2:], d.base_ms - after, lo, hi))
    return out


def _uniform(slots: Sequence[int], base: int, lo: int, hi: int) -> list[int]:
    """``base + slot`` for the slots that land in (lo, hi]."""
    first, last = bisect_right(slots, lo - base), bisect_right(slots, hi - base)
    return [base + s for s in slots[first:last]] if first < last else []


def _days(key: str, lo: int, hi: int) -> Iterator[_Day]:
    # local dates are within a day of UTC dates: look one day further on both sides
    for ordinal in range(lo // DAY_MS + _EPOCH_ORDINAL - 1, hi // DAY_MS + _EPOCH_ORDINAL + 2):
        yield _day(key, ordinal)


def occurrences_ms(job: JobLike, start_ms: int, end_ms: int) -> list[int]:
    """Fires of ``job`` in (start_ms, end_ms], ms since the epoch, ascending, jitter
    included, within the job's ``start``/``end``/``max_runs`` bounds."""
    start_ms, end_ms = _bounded(job, start_ms, end_ms)
    found = _unbounded_ms(job, start_ms, end_ms)
    rules = getattr(job, "calendar", ())
    return [ms for ms in found if _skipped(rules, job.timezone, ms) is None] if rules else found


def _skipped(rules: tuple[str, ...], timezone: str, ms: int) -> str | None:
    """Why the fire at ``ms`` is skipped by the calendar ``rules`` (the day in the job's
    zone), or None."""
    return skipped(rules, datetime.fromtimestamp(ms / 1000, zone(timezone)).date())


def _bounded(job: JobLike, start_ms: int, end_ms: int) -> tuple[int, int]:
    """The window (start_ms, end_ms] cut to the job's bounds."""
    if job.start_ms is not None:
        start_ms = max(start_ms, job.start_ms - 1)
    if job.end_ms is not None:
        end_ms = min(end_ms, job.end_ms)
    if job.max_runs is not None:
        last = _last_run_ms(Spec.of(job))
        if last is not None:
            end_ms = min(end_ms, last)
    return start_ms, end_ms


def _unbounded_ms(job: JobLike, start_ms: int, end_ms: int) -> list[int]:
    if job.every_ms is not None:
        return _every_ms(job, job.every_ms, start_ms, end_ms)
    if job.cron is None:
        return []  # no schedule: the job runs when triggered
    return _cron_ms(job, job.cron, start_ms, end_ms)


def _every_ms(job: JobLike, every: int, start_ms: int, end_ms: int) -> list[int]:
    """``anchor + k * every + jitter`` in (start_ms, end_ms]."""
    base = (job.anchor_ms or 0) + jitter_ms(job)
    if end_ms <= start_ms:
        return []
    first = (start_ms - base) // every + 1
    last = (end_ms - base) // every
    return [base + k * every for k in range(first, last + 1)]


@functools.lru_cache(maxsize=4096)
def _last_run_ms(spec: Spec) -> int | None:
    """The ``max_runs``-th fire at or after ``start`` (None: fewer fires than that in
    :data:`NEXT_FIRE_YEARS` years, or within ``end``)."""
    assert spec.max_runs is not None
    after = (spec.start_ms if spec.start_ms is not None else 0) - 1
    stop = after + 366 * NEXT_FIRE_YEARS * DAY_MS
    if spec.end_ms is not None:
        stop = min(stop, spec.end_ms)
    left = spec.max_runs
    for lo, hi in _windows(after, stop):
        found = _unbounded_ms(spec, lo, hi)
        if len(found) >= left:
            return found[left - 1]
        left -= len(found)
    return None


def _cron_ms(job: JobLike, cron: str, start_ms: int, end_ms: int) -> list[int]:
    """Fires of the cron expression in (start_ms, end_ms].

    The planner's hot loop: days with a single UTC offset are enumerated from
    the cached slot list without building datetimes.
    """
    f = parse(cron)
    tz = zone(job.timezone)
    shift = jitter_ms(job)
    lo, hi = start_ms - shift, end_ms - shift
    out: list[int] = []
    if hi <= lo:
        return out
    slots = f.slots_ms
    mixed = False
    for d in _days(job.timezone, lo, hi):
        if d.day not in f.days(d.year, d.month):
            continue
        if d.offset_ms is None:
            mixed = True
            out.extend(u + shift for u in _changing_day(f, tz, d, lo, hi))
            continue
        base = d.base_ms - d.offset_ms
        first, last = bisect_right(slots, lo - base), bisect_right(slots, hi - base)
        if first < last:
            base += shift
            out.extend([base + s for s in slots[first:last]])
    # gap slots of fixed-time jobs collapse onto the transition instant
    return sorted(set(out)) if mixed else out


def _ms(t: datetime) -> int:
    if t.tzinfo is None:
        raise ScheduleError(f"{t.isoformat()}: a time zone is required")
    return (t - _EPOCH_UTC) // _MS


def _at(ms: int) -> datetime:
    return _EPOCH_UTC + timedelta(milliseconds=ms)


def _windows(start_ms: int, end_ms: int) -> Iterator[tuple[int, int]]:
    """(start_ms, end_ms] cut into growing pieces, so callers can stop early cheaply."""
    size = 3_600_000
    while start_ms < end_ms:
        stop = min(end_ms, start_ms + size)
        yield start_ms, stop
        start_ms, size = stop, min(size * 2, _MAX_CHUNK_MS)


def occurrences(job: JobLike, start: datetime, end: datetime) -> Iterator[datetime]:
    """Fires of ``job`` strictly after ``start`` up to and including ``end``.

    Aware UTC datetimes, ascending, never twice the same; lazy, so a far
    ``end`` costs only what the caller consumes.
    """
    # Within the job's bounds only: past its end (or its last run) there is nothing to find.
    first, last = _bounded(job, _ms(start), _ms(end))
    for lo, hi in _windows(first, last):
        for ms in occurrences_ms(job, lo, hi):
            yield _at(ms)


def explain(job: JobLike, start: datetime, end: datetime) -> Iterator[Fire]:
    """Like :func:`occurrences`, with local times, DST notes and the slots a gap skips."""
    tz = zone(job.timezone)
    rules = tuple(getattr(job, "calendar", ()))
    if job.cron is None or job.every_ms is not None:
        for utc in occurrences(replace(Spec.of(job), calendar=()), start, end):
            why = _skipped(rules, job.timezone, _ms(utc)) if rules else None
            if not quiet(rules, why):
                yield Fire(utc, utc.astimezone(tz), f"skipped: {why}" if why else None, not why)
        return
    f = parse(job.cron)
    shift = jitter_ms(job)
    first, last = _bounded(job, _ms(start), _ms(end))
    for lo, hi in _windows(first - shift, last - shift):
        found: list[tuple[int, str | None, bool]] = []
        for d in _days(job.timezone, lo, hi):
            if d.day in f.days(d.year, d.month):
                found.extend(_mixed_day(f, tz, d, lo, hi))
        seen: set[int] = set()
        # at one instant, prefer the record that explains itself
        for ms, note, runs in sorted(found, key=lambda i: (i[0], not i[2], i[1] is None)):
            if runs and ms in seen:
                continue
            if runs:
                seen.add(ms)
            utc = _at(ms + shift)
            why = _skipped(rules, job.timezone, ms + shift) if rules and runs else None
            if why:
                if quiet(rules, why):
                    continue
                note, runs = f"skipped: {why}", False
            yield Fire(utc, utc.astimezone(tz), note, runs)


def upcoming(job: JobLike, after: datetime, count: int, years: int = 50) -> list[Fire]:
    """The next ``count`` fires after ``after`` (fewer if ``years`` pass first), with the
    gap-skipped slots met on the way."""
    found: list[Fire] = []
    runs = 0
    for fire in explain(job, after, after + timedelta(days=366 * years)):
        found.append(fire)
        runs += fire.runs
        if runs >= count:
            break
    return found


#: How far ahead a next fire is looked for before a schedule counts as never firing.
NEXT_FIRE_YEARS = 9


def next_fires(job: JobLike, after_ms: int, count: int, years: int = NEXT_FIRE_YEARS) -> list[int]:
    """The next ``count`` fires of ``job`` strictly after ``after_ms`` (fewer if ``years``
    pass first)."""
    start = _at(after_ms)
    found = occurrences(job, start, start + timedelta(days=366 * years))
    return [_ms(t) for t in islice(found, count)]
