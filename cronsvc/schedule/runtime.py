"""Runtime schedules: when a job of the file fires for one caller, with what payload.

A runtime schedule is data, never code: an id the caller chooses (``digest:user-42``),
the name of a job defined in the job file, a ``cron`` or ``every`` schedule with the
bounds file jobs have, a JSON payload, and overrides of the job's run policy. Workers
run the job's code from their own file with the schedule's payload.

Its fires are ``<job>@<due_ms>!<schedule id>`` (:func:`cronsvc.fires.fire_id`), so they
stay stable and unique beside the job's own fires.

The stored form, one hash field per schedule (``Keys.schedules``), is one short line
that the Lua scripts read with a single pattern match (``lua/includes/schedules.lua``)::

    rev|updated.created|actor|job|policy|when|payload

- ``rev``: bumped by every change; a change or a plan names the rev it read (a
  compare-and-set), so nothing is planned from a definition that is gone.
- ``updated.created``: ms since the epoch in base 36; ``created`` is left out while it
  equals ``updated`` (a schedule never changed since its creation).
- ``policy``: ``p`` if paused, a letter for an overridden ``catch_up`` (``a`` all, ``l``
  latest, ``n`` none) and ``overlap`` (``A`` allow, ``F`` forbid, ``R`` replace, ``Q``
  queue), and the digits of an overridden ``starting_deadline`` in ms; empty for a running
  schedule that takes its job's policy.
- ``when``: the cron expression, or ``~`` and ``every`` in ms; then ``;`` and the time
  zone unless it is UTC, its area (``Europe/``) written as one letter (``E/``). A schedule
  with bounds, an anchor, jitter or a calendar has the compact JSON of all of them here
  instead (as in the form before). Never holds ``|``.
- ``payload``: its JSON, or empty; last, so it may hold anything.

The form before (still read, and rewritten by the next change) was
``rev|created_ms|updated_ms|actor|job|paused|catch_up|deadline_ms|overlap|when|payload``
with decimal times, ``paused`` ``1``/``0``, a field per override and ``when`` always JSON.

Everything after ``actor`` is the definition: an upsert with the same definition
changes nothing. :func:`build` (or :mod:`cronsvc.schedule.upserts` for a batch) is the
only way to make one; :func:`content_of` the only writer of the definition and
:func:`parse_stored` the only reader in Python.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from json.encoder import c_make_encoder, encode_basestring_ascii  # type: ignore[attr-defined]
from typing import Any, Literal

from cronsvc.clock import dt_to_ms
from cronsvc.durations import parse_duration
from cronsvc.errors import BadSchedule, ScheduleError
from cronsvc.schedule.calendars import day_rules, mapping_rules
from cronsvc.schedule.expand import Spec, next_fires, occurrences_ms, validate_cron, zone
from cronsvc.schedule.when import range_problem

#: A schedule id: letters, digits and ``_ . : / -``, at most 200 characters.
SCHEDULE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:/-]{0,199}")
#: The largest payload a schedule or a one-off run may carry, as JSON.
MAX_PAYLOAD_BYTES = 64 * 1024
MAX_ACTOR = 100
CATCH_UP = ("all", "latest", "none")
OVERLAP = ("allow", "forbid", "replace", "queue")

Outcome = Literal["created", "changed", "unchanged"]
When = datetime | int | str | None
Duration = timedelta | float | int | str | None


@dataclass(frozen=True)
class RuntimeSchedule:
    """One runtime schedule: its definition and who changed it last, when."""

    id: str
    job: str
    cron: str | None = None
    every_ms: int | None = None
    anchor_ms: int | None = None
    timezone: str = "UTC"
    start_ms: int | None = None
    end_ms: int | None = None
    max_runs: int | None = None
    jitter: float = 0.0
    payload: Any = None
    paused: bool = False
    catch_up: str | None = None  # None: the job's
    starting_deadline_ms: int | None = None  # None: the job's
    overlap: str | None = None  # None: the job's
    calendar: tuple[str, ...] = ()  # days without fires (cronsvc.schedule.calendars)
    rev: int = 0
    created_ms: int = 0
    updated_ms: int = 0
    actor: str = ""

    @property
    def name(self) -> str:
        """What jitter is derived from: each schedule of a job gets its own offset."""
        return self.id

    @property
    def spec(self) -> Spec:
        """When it fires."""
        return Spec(cron=self.cron, timezone=self.timezone, name=self.id, jitter=self.jitter,
                    every_ms=self.every_ms, anchor_ms=self.anchor_ms, start_ms=self.start_ms,
                    end_ms=self.end_ms, max_runs=self.max_runs, calendar=self.calendar)

    @property
    def content(self) -> str:
        """The definition as stored: everything of the line after ``actor``."""
        payload = "" if self.payload is None else stored_json(self.payload)
        return content_of(self.job, policy_of(self.paused, self.catch_up,
                                              self.starting_deadline_ms, self.overlap),
                          when_of(self), payload)

    def stored(self) -> str:
        """The hash value of this schedule (see the module docstring)."""
        return line_head(self.rev, self.updated_ms, self.created_ms, self.actor) + self.content

    def as_dict(self) -> dict[str, Any]:
        """Every field, for JSON output."""
        return {f: getattr(self, f) for f in self.__dataclass_fields__}


def line_head(rev: int, updated_ms: int, created_ms: int, actor: str) -> str:
    """The stored line up to its content: ``rev|updated.created|actor|``."""
    created = "" if created_ms == updated_ms else _b36(created_ms)
    return f"{rev}|{_b36(updated_ms)}.{created}|{actor}|"


def content_of(job: str, policy: str, when: str, payload: str) -> str:
    """The stored definition (the line after ``actor``) of its encoded parts."""
    return f"{job}|{policy}|{when}|{payload}"


_CATCH_UP_CODE = {"all": "a", "latest": "l", "none": "n"}
_OVERLAP_CODE = {"allow": "A", "forbid": "F", "replace": "R", "queue": "Q"}
_POLICY = re.compile(r"(p?)([aln]?)([AFRQ]?)(\d*)")
#: IANA zone areas, one letter each in the stored line (no zone name is one letter then /).
_AREAS = {"Africa": "F", "America": "A", "Antarctica": "N", "Arctic": "R", "Asia": "S",
          "Atlantic": "T", "Australia": "U", "Europe": "E", "Indian": "I", "Pacific": "P",
          "Etc": "X"}
_AREA_OF = {code: area for area, code in _AREAS.items()}


def policy_of(paused: bool, catch_up: str | None, deadline_ms: int | None,
              overlap: str | None) -> str:
    """The stored policy field: empty for a running schedule with its job's policy."""
    return "".join(("p" if paused else "", _CATCH_UP_CODE[catch_up] if catch_up else "",
                    _OVERLAP_CODE[overlap] if overlap else "",
                    "" if deadline_ms is None else str(deadline_ms)))


def short_zone(timezone: str) -> str:
    """The stored form of a zone: its area as one letter."""
    area, slash, place = timezone.partition("/")
    code = _AREAS.get(area) if slash else None
    return f"{code}/{place}" if code else timezone


def compact_when(cron: str | None, every_ms: int | None, timezone: str) -> str:
    """The stored ``when`` of a schedule without bounds, anchor, jitter or calendar."""
    head = cron if cron is not None else f"~{every_ms}"
    return head if timezone == "UTC" else f"{head};{short_zone(timezone)}"


def when_of(s: RuntimeSchedule) -> str:
    """The stored ``when`` of ``s``: compact, or the JSON of every field it has set."""
    if (s.anchor_ms is None and s.start_ms is None and s.end_ms is None
            and s.max_runs is None and not s.jitter and not s.calendar):
        return compact_when(s.cron, s.every_ms, s.timezone)
    return stored_json({k: v for k, v in (
        ("cron", s.cron), ("every_ms", s.every_ms), ("anchor_ms", s.anchor_ms),
        ("timezone", s.timezone), ("start_ms", s.start_ms), ("end_ms", s.end_ms),
        ("max_runs", s.max_runs), ("jitter", s.jitter or None),
        ("calendar", list(s.calendar) or None)) if v is not None})


def _b36(ms: int) -> str:
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    out = ""
    while True:
        ms, d = divmod(ms, 36)
        out = digits[d] + out
        if not ms:
            return out


_STORED = re.compile(r"^(\d+)\|([0-9a-z]+)\.([0-9a-z]*)\|([^|]*)\|([^|]*)\|([^|]*)\|([^|]+)"
                     r"\|(.*)$", re.S)
_STORED_BEFORE = re.compile(r"^(\d+)\|(\d+)\|(\d+)\|([^|]*)\|([^|]*)\|([01])\|([^|]*)\|(\d*)"
                            r"\|([^|]*)\|([^|]*)\|(.*)$", re.S)


def parse_stored(sid: str, line: str) -> RuntimeSchedule:
    """A schedule from its stored line, of this form or the one before; ValueError if the
    line is not one (a line written by hand may hold anything: what is not a stored
    schedule's field is said so)."""
    try:
        m = _STORED.match(line)
        if m is not None:
            rev, updated36, created36, actor, job, policy, when, payload = m.groups()
            pm = _POLICY.fullmatch(policy)
            if pm is None:
                raise ValueError(f"its policy is {policy!r}")
            paused, catch_up, overlap, deadline = pm.groups()
            updated = int(updated36, 36)
            times = (int(rev), int(created36, 36) if created36 else updated, updated)
            policy_fields: tuple[bool, str, str, str] = (
                paused == "p", _CATCH_UP_BY[catch_up] if catch_up else "",
                deadline, _OVERLAP_BY[overlap] if overlap else "")
        else:
            m = _STORED_BEFORE.match(line)
            if m is None:
                raise ValueError(f"{line[:80]!r}")
            (rev, created, updated_s, actor, job, paused, catch_up, deadline, overlap, when,
             payload) = m.groups()
            times = (int(rev), int(created), int(updated_s))
            policy_fields = (paused == "1", catch_up, deadline, overlap)
        w = _when(when)
        return RuntimeSchedule(
            id=sid, job=job, cron=_opt(w, "cron", str), every_ms=_opt(w, "every_ms", int),
            anchor_ms=_opt(w, "anchor_ms", int), timezone=_opt(w, "timezone", str) or "UTC",
            start_ms=_opt(w, "start_ms", int), end_ms=_opt(w, "end_ms", int),
            max_runs=_opt(w, "max_runs", int), jitter=float(w.get("jitter") or 0.0),
            payload=json.loads(payload) if payload else None,
            calendar=tuple(_opt(w, "calendar", list) or ()),
            paused=policy_fields[0], catch_up=policy_fields[1] or None,
            starting_deadline_ms=int(policy_fields[2]) if policy_fields[2] else None,
            overlap=policy_fields[3] or None,
            rev=times[0], created_ms=times[1], updated_ms=times[2], actor=actor)
    except (ValueError, TypeError) as exc:
        raise ValueError(f"schedule {sid!r}: not a stored schedule: {exc}") from None


_CATCH_UP_BY = {code: name for name, code in _CATCH_UP_CODE.items()}
_OVERLAP_BY = {code: name for name, code in _OVERLAP_CODE.items()}


def _opt(when: dict[str, Any], name: str, kind: type) -> Any:
    """A field of a stored schedule's ``when``, None if absent; TypeError if of another
    type (a bool is no int)."""
    value = when.get(name)
    if value is None or (isinstance(value, kind) and not isinstance(value, bool)):
        return value
    raise TypeError(f"its {name} is {value!r}")


def _when(text: str) -> dict[str, Any]:
    """The fields of a stored ``when``, compact or JSON."""
    if text.startswith("{"):
        w = json.loads(text)
        if not isinstance(w, dict):
            raise TypeError(f"its schedule is {type(w).__name__}, not an object")
        return w
    head, _, timezone = text.partition(";")
    area, slash, place = timezone.partition("/")
    if slash and area in _AREA_OF:
        timezone = f"{_AREA_OF[area]}/{place}"
    out: dict[str, Any] = {"timezone": timezone or "UTC"}
    if head.startswith("~"):
        out["every_ms"] = int(head[1:])
    else:
        out["cron"] = head
    return out


def build(sid: str, *, job: str, now_ms: int, cron: str | None = None,
          every: Duration = None, anchor: When = None, timezone: str = "UTC",
          start: When = None, end: When = None, max_runs: int | None = None,
          payload: Any = None, paused: bool = False, catch_up: str | None = None,
          starting_deadline: Duration = None, jitter: Duration = None,
          overlap: str | None = None, actor: str | None = None, skip: Any = None,
          business_days: bool = False, only: str | None = None) -> RuntimeSchedule:
    """A checked schedule; BadSchedule naming the schedule and the field otherwise.

    Times are aware datetimes, ms since the epoch, or ISO 8601 text (a time without a
    zone is in ``timezone``); durations are ``timedelta``, seconds, or text as in the
    job file (``90m``). ``max_runs`` counts from ``start``, which defaults to now.
    ``skip`` (``{holidays: DE-BY, dates: [...]}`` or a list of those), ``business_days``
    and ``only`` are a job's calendar (the job file's named calendars are its own).
    """
    bad = _bad(sid)
    if not isinstance(sid, str) or not SCHEDULE_ID.fullmatch(sid):
        raise BadSchedule(f"schedule id {sid!r}: use 1 to 200 letters, digits, '_', '.', ':', "
                          "'/' and '-', starting with a letter or digit")
    if cron is not None and every is not None:
        raise bad("cron", "set either cron or every, not both")
    if cron is None and every is None:
        raise bad("cron", "set cron or every")
    if cron is not None:
        try:
            validate_cron(cron)
        except ScheduleError as exc:
            raise bad("cron", f"{cron!r}: {exc}") from None
    try:
        zone(timezone)
    except ScheduleError as exc:
        raise bad("timezone", str(exc)) from None
    every_ms = _duration_ms(every, bad, "every", least_ms=1000)
    if anchor is not None and every is None:
        raise bad("anchor", "only applies to every")
    times = {name: _time_ms(value, timezone, now_ms, bad, name)
             for name, value in (("anchor", anchor), ("start", start), ("end", end))}
    if max_runs is not None and (isinstance(max_runs, bool) or not isinstance(max_runs, int)
                                 or max_runs < 1):
        raise bad("max_runs", f"{max_runs!r}: a whole number of at least 1")
    if max_runs is not None and times["start"] is None:
        times["start"] = now_ms  # counted from now, and from then on the same
    if times["start"] is not None and times["end"] is not None and times["end"] <= times["start"]:
        raise bad("end", "must be after start")
    if catch_up is not None and catch_up not in CATCH_UP:
        raise bad("catch_up", f"{catch_up!r}: one of {', '.join(CATCH_UP)}")
    if overlap is not None and overlap not in OVERLAP:
        raise bad("overlap", f"{overlap!r}: one of {', '.join(OVERLAP)}")
    problem = payload_problem(payload)
    if problem:
        raise bad("payload", problem)
    if actor is not None and not isinstance(actor, str):
        raise bad("actor", f"{actor!r}: text naming who made the change")
    calendar = _calendar(skip, business_days, only, cron, bad)
    jitter_ms = _duration_ms(jitter, bad, "jitter", least_ms=0)
    deadline_ms = _duration_ms(starting_deadline, bad, "starting_deadline", least_ms=1)
    return RuntimeSchedule(
        id=sid, job=job, cron=cron, every_ms=every_ms, anchor_ms=times["anchor"],
        timezone=timezone, start_ms=times["start"], end_ms=times["end"], max_runs=max_runs,
        jitter=(jitter_ms or 0) / 1000, payload=payload, paused=bool(paused),
        catch_up=catch_up, starting_deadline_ms=deadline_ms, overlap=overlap,
        calendar=calendar, created_ms=now_ms, updated_ms=now_ms, actor=actor_of(actor))


def _bad(sid: str) -> Callable[[str, str], BadSchedule]:
    def bad(field: str, problem: str) -> BadSchedule:
        return BadSchedule(f"schedule {sid!r}: {field}: {problem}")
    return bad


def actor_of(actor: str | None) -> str:
    """Who changed a schedule, as stored: no ``|`` nor line break, at most
    :data:`MAX_ACTOR` characters."""
    return (actor or "").replace("|", "/").replace("\n", " ")[:MAX_ACTOR]


def every_ms_of(every: Duration) -> int | None:
    """The ``every`` of a schedule in ms; BadSchedule (a ValueError) if it is no duration
    of at least a second."""
    return _duration_ms(every, _bad(""), "every", least_ms=1000)


def _calendar(skip: Any, business_days: bool, only: str | None, cron: str | None,
              bad: Any) -> tuple[str, ...]:
    """The calendar rules of a schedule's skip, business_days and only."""
    rules: list[str] = []
    for item in skip if isinstance(skip, (list, tuple)) else ([skip] if skip else []):
        try:
            rules += mapping_rules(item)
        except ValueError as exc:
            field, problem = exc.args
            raise bad(f"skip.{field}" if field else "skip", problem) from None
    if only is not None and cron is None:
        raise bad("only", f"{only} picks among the days of a cron schedule: set cron too")
    try:
        return day_rules(tuple(dict.fromkeys(rules)), bool(business_days), only)
    except ValueError as exc:
        raise bad("only", str(exc)) from None


def with_paused(schedule: RuntimeSchedule, paused: bool, actor: str | None,
                now_ms: int) -> RuntimeSchedule:
    """The same schedule, paused or not."""
    return replace(schedule, paused=paused, updated_ms=now_ms, actor=actor_of(actor))


def payload_problem(payload: Any) -> str | None:
    """Why ``payload`` cannot go with a schedule's or a one-off's fires, or None. A run
    gets it in its environment, where a larger one fails the run's start."""
    try:
        size = 0 if payload is None else len(stored_json(payload).encode())
    except (TypeError, ValueError) as exc:
        return f"not JSON: {exc}"
    return f"{size:,} bytes as JSON; at most {MAX_PAYLOAD_BYTES:,}" \
        if size > MAX_PAYLOAD_BYTES else None


_ENCODER = json.JSONEncoder(separators=(",", ":"), sort_keys=True, allow_nan=False)
# The C encoder json.dumps makes on every call, made once (a batch encodes a payload per
# schedule); without the circular check, which the slow way does if it comes to that.
_C_ENCODE = c_make_encoder and c_make_encoder(
    None, _ENCODER.default, encode_basestring_ascii, None, ":", ",", True, False, False)


def stored_json(value: Any) -> str:
    """JSON as stored: compact, keys sorted, no NaN; ValueError or TypeError if ``value``
    is not JSON."""
    if type(value) is dict and len(value) == 1:  # most payloads: {"user": 42}, in half the time
        for key, item in value.items():
            if type(key) is str:
                if type(item) is int:
                    return f"{{{encode_basestring_ascii(key)}:{int.__repr__(item)}}}"
                if type(item) is str:
                    return f"{{{encode_basestring_ascii(key)}:{encode_basestring_ascii(item)}}}"
    if _C_ENCODE is None:
        return _ENCODER.encode(value)
    try:
        return "".join(_C_ENCODE(value, 0))
    except RecursionError:  # nested too deep, or circular: as json.dumps says it
        return _ENCODER.encode(value)


def _duration_ms(value: Duration, bad: Any, field: str, least_ms: int) -> int | None:
    if value is None:
        return None
    try:
        seconds = (value.total_seconds() if isinstance(value, timedelta)
                   else parse_duration(value, allow_zero=least_ms == 0))
    except ValueError as exc:
        raise bad(field, f"{value!r}: {exc}") from None
    ms = round(seconds * 1000)
    if ms < least_ms:
        raise bad(field, f"{value!r}: at least {least_ms // 1000}s")
    return ms


def _time_ms(value: When, timezone: str, now_ms: int, bad: Any, field: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool):
        raise bad(field, f"{value!r}: not a time")
    if isinstance(value, int):
        ms = value
    else:
        try:
            at = value if isinstance(value, datetime) else datetime.fromisoformat(str(value))
        except ValueError:
            raise bad(field, f"{value!r}: not an ISO 8601 time") from None
        ms = dt_to_ms(at if at.tzinfo else at.replace(tzinfo=zone(timezone)))
    problem = range_problem(ms, now_ms)  # the range one-off runs have too
    if problem:
        raise bad(field, f"{value!r} {problem}")
    return ms


#: Fires of one schedule queued ahead at most (the planner may ask for more when it ticks
#: seldom): an every-second schedule holds minutes of fires, not two hours of them.
MAX_AHEAD = 256
#: How far a schedule without a fire in sight is looked at again.
REVISIT_MS = 366 * 86_400_000


def plan_schedule(schedule: RuntimeSchedule, after_ms: int, until_ms: int,
                  max_ahead: int = MAX_AHEAD) -> tuple[list[int], int]:
    """:func:`plan_window` of a schedule; a paused one queues nothing until it is resumed
    (resuming changes it, and the change plans it again)."""
    if schedule.paused:
        return [], until_ms + REVISIT_MS
    return plan_window(schedule.spec, after_ms, until_ms, max_ahead)


def plan_window(spec: Spec, after_ms: int, until_ms: int,
                max_ahead: int = MAX_AHEAD) -> tuple[list[int], int]:
    """The fires of ``spec`` to queue in (after_ms, until_ms], at most ``max_ahead`` of
    them, and the new mark: every fire at or before it is then queued. Past the window
    the mark reaches to just before the next fire, so a daily schedule is looked at
    once a day, not at every tick."""
    dues = occurrences_ms(spec, after_ms, until_ms)
    if len(dues) > max_ahead:
        dues = dues[:max_ahead]
        return dues, dues[-1]
    # Most schedules fire within a day: look there first, in one piece.
    upcoming = occurrences_ms(spec, until_ms, until_ms + 86_400_000)[:1] or next_fires(
        spec, until_ms, 1)
    return dues, (upcoming[0] - 1 if upcoming else until_ms + REVISIT_MS)
