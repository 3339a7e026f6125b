"""A schedule in plain words, for ``cronsvc ls``: ``*/5 * * * *`` is "every 5 minutes".

Common shapes get a sentence; anything else falls back to naming each
restricted field, so the description is never wrong, at worst terse. The
expression is assumed valid (:func:`cronsvc.schedule.fields.validate_cron`).
"""

from __future__ import annotations

import re

from cronsvc.clock import iso_utc
from cronsvc.durations import format_duration
from cronsvc.schedule.calendars import words as calendar_words
from cronsvc.schedule.expand import Spec
from cronsvc.schedule.fields import MACROS, normalize_cron

__all__ = ["describe", "describe_schedule", "schedule_text"]

DAYS = ("Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday")
MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August",
          "September", "October", "November", "December")
_NAMES = {n[:3].lower(): i for i, n in enumerate(DAYS)} | {
    n[:3].lower(): i + 1 for i, n in enumerate(MONTHS)}
_ORDINALS = {1: "first", 2: "second", 3: "third", 4: "fourth", 5: "fifth"}
_NUMBER = re.compile(r"^\d+$")
_STEP = re.compile(r"^(\*|\d+)/(\d+)$")
_FULL_STEP = {"second": re.compile(r"^0-59/(\d+)$"), "minute": re.compile(r"^0-59/(\d+)$"),
              "hour": re.compile(r"^0-23/(\d+)$")}


def describe(expr: str) -> str:
    """``expr`` in words, e.g. ``30 2 * * 1-5`` -> "at 02:30 on Monday to Friday"."""
    text = expr.strip()
    if text.lower() == "@hourly":
        return "every hour"
    fields = normalize_cron(MACROS.get(text.lower(), text)).split()
    second = fields.pop(0) if len(fields) == 6 else None
    minute, hour, dom, month, dow = fields
    when, daily = _time(second, minute, hour)
    days_of_month, months = _numbers(dom), _numbers(month)
    if days_of_month and months and len(days_of_month) == len(months) == 1 and dow == "*":
        # @yearly and the like: "on January 1"
        return f"{when} on {MONTHS[months[0] - 1]} {days_of_month[0]}"
    days = _days(dom, dow) or ("every day" if daily and month == "*" else "")
    return " ".join(part for part in (when, days, _months(month)) if part)


def _plural(n: int, unit: str) -> str:
    return f"every {unit}" if n == 1 else f"every {n} {unit}s"


def _nth(n: int) -> str:
    """2nd, 3rd, 11th, 22nd; "" for 1 (every hour)."""
    if n == 1:
        return ""
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def _numbers(field: str) -> list[int] | None:
    """The values of a plain list such as ``0,15,30``; None for ranges, steps, ``*``."""
    parts = field.split(",")
    if all(_NUMBER.match(p) for p in parts):
        return sorted({int(p) for p in parts})
    return None


def _every(field: str, unit: str) -> str | None:
    """``*`` and ``*/n`` as "every unit" / "every n units"."""
    if field == "*":
        return f"every {unit}"
    m = _STEP.match(field)
    if m and m.group(1) in ("*", "0"):
        return _plural(int(m.group(2)), unit)
    m = _FULL_STEP.get(unit, re.compile("$^")).match(field)
    if m:  # 0-59/n, 0-23/n: the whole range, so the same as */n
        return _plural(int(m.group(1)), unit)
    return None


def _time(second: str | None, minute: str, hour: str) -> tuple[str, bool]:
    """The time-of-day part, and whether it names times of one day (then "every day" fits)."""
    if second is not None and second != "0":
        sec = _every(second, "second") or f"at second {_list(second, str)}"
        if minute == "*" and hour == "*":
            return (sec if sec.startswith("every") else f"every minute {sec}"), False
        rest, daily = _time(None, minute, hour)
        return f"{sec}, {rest}", daily
    minutes, hours = _numbers(minute), _numbers(hour)
    if minutes is not None and hours is not None and len(minutes) * len(hours) <= 6:
        return "at " + _join([f"{h:02d}:{m:02d}" for h in hours for m in minutes]), True
    span = re.match(r"^(\d+)-(\d+)$", hour)
    every_minute = _every(minute, "minute")
    if span and (every_minute or minutes is not None and len(minutes) == 1):
        first, last = int(span.group(1)), int(span.group(2))
        if every_minute:
            return f"{every_minute} from {first:02d}:00 to {last:02d}:59", True
        return f"every hour from {first:02d}:{minutes[0]:02d} to {last:02d}:{minutes[0]:02d}", True  # type: ignore[index]
    if every_minute and hour == "*":
        return every_minute, False
    every_hour = _every(hour, "hour")
    if minutes == [0] and every_hour:
        return every_hour, False
    if minutes is not None and every_hour:
        return f"{every_hour} at minute {_join([str(m) for m in minutes])}", False
    minute_part = every_minute or f"at minute {_list(minute, str)}"
    if hour == "*":
        return f"{minute_part} of every hour", False
    if every_hour:  # every n hours: "of every 2nd hour"
        n = int(every_hour.split()[1]) if every_hour != "every hour" else 1
        return f"{minute_part} of every {_nth(n)} hour", False
    return f"{minute_part} past hour {_list(hour, str)}", True


def _days(dom: str, dow: str) -> str:
    dom_any, dow_any = dom in ("*", "?"), dow in ("*", "?")
    if dom_any and dow_any:
        return ""
    by_dom = "" if dom_any else _day_of_month(dom)
    by_dow = "" if dow_any else _day_of_week(dow)
    if by_dom and by_dow:
        if dom.startswith("*") or dow.startswith("*"):  # classic cron: both must match
            return f"{by_dom} if it is {by_dow.removeprefix('on ')}"
        return f"{by_dom} or {by_dow}"
    return by_dom or by_dow


def _day_of_month(field: str) -> str:
    if field.upper() == "L":
        return "on the last day of the month"
    m = re.match(r"^(\d+)W$", field, re.IGNORECASE)
    if m:
        return f"on the weekday nearest day {m.group(1)} of the month"
    step = _every(field, "day")
    if step:
        return step
    numbers = _numbers(field)
    if numbers is not None:
        noun = "day" if len(numbers) == 1 else "days"
        return f"on {noun} {_join([str(n) for n in numbers])} of the month"
    return f"on day {_list(field, str)} of the month"


def _day_of_week(field: str) -> str:
    m = re.match(r"^L(\w+)$", field, re.IGNORECASE)
    if m:
        return f"on the last {_name(m.group(1), DAYS, 0)} of the month"
    m = re.match(r"^(\w+)#(\d)$", field)
    if m and int(m.group(2)) in _ORDINALS:
        return f"on the {_ORDINALS[int(m.group(2))]} {_name(m.group(1), DAYS, 0)} of the month"
    return "on " + _list(field, lambda v: _name(v, DAYS, 0))


def _months(field: str) -> str:
    if field == "*":
        return ""
    step = _STEP.match(field)
    if step:
        start = "January" if step.group(1) == "*" else _name(step.group(1), MONTHS, 1)
        return f"every {step.group(2)} months from {start}"
    return "in " + _list(field, lambda v: _name(v, MONTHS, 1))


def _name(value: str, names: tuple[str, ...], first: int) -> str:
    """A day or month number (or its three-letter name) as a full name."""
    key = value.lower()
    n = _NAMES.get(key[:3]) if not key.isdigit() else int(key)
    if n is None:
        return value
    return names[(n - first) % len(names)]


def _list(field: str, name: object) -> str:
    """A cron list in words: ``1-5,0`` -> "1 to 5 and 0", ``0-20/2`` -> "0 to 20 (every 2)"."""
    words = []
    for part in field.split(","):
        base, _, step = part.partition("/")
        lo, dash, hi = base.partition("-")
        text = name(lo) if not dash else f"{name(lo)} to {name(hi)}"  # type: ignore[operator]
        if base == "*":
            text = "any"
        words.append(f"{text} (every {step})" if step else text)
    return _join(words)


def _join(items: list[str]) -> str:
    if len(items) <= 1:
        return "".join(items)
    return ", ".join(items[:-1]) + " and " + items[-1]


def schedule_text(spec: Spec) -> str:
    """The schedule as the file writes it: the cron expression, ``every 90m``, or ``""``
    for a job that runs only when triggered."""
    if spec.every_ms is not None:
        return f"every {format_duration(spec.every_ms)}"
    return spec.cron or ""


def describe_schedule(spec: Spec) -> str:
    """The whole schedule in words: when, then its bounds."""
    if spec.every_ms is not None:
        when = _every_words(spec.every_ms)
        if spec.anchor_ms:
            when += f" from {iso_utc(spec.anchor_ms)}"
    elif spec.cron is not None:
        when = describe(spec.cron)
    else:
        return "when triggered (no schedule)"
    bounds = [calendar_words(spec.calendar),
              f"from {iso_utc(spec.start_ms)}" if spec.start_ms is not None else "",
              f"until {iso_utc(spec.end_ms)}" if spec.end_ms is not None else "",
              f"at most {spec.max_runs} run{'' if spec.max_runs == 1 else 's'}"
              if spec.max_runs else ""]
    return ", ".join([when, *(b for b in bounds if b)])


def _every_words(ms: int) -> str:
    for unit, size in (("day", 86_400_000), ("hour", 3_600_000), ("minute", 60_000),
                       ("second", 1000)):
        if ms % size == 0:
            return _plural(ms // size, unit)
    return f"every {format_duration(ms)}"
