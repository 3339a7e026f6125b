"""A Celery app's ``beat_schedule`` as jobs of kind ``celery``.

:func:`beat_jobs` reads the app's configuration only: no broker, no worker, no beat.
Each entry becomes one job whose ``celery`` target sends the same task, with the same
arguments and options, through Celery's own client. A ``crontab`` becomes ``cron`` in
the app's zone, a ``timedelta`` or a number of seconds becomes ``every``. What cronsvc
cannot fire the same way is refused, by name: ``relative=True`` intervals (beat rounds
them to the interval from when it starts), ``solar`` schedules, schedules of another
class, and arguments the JSON serializer cannot carry.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
from datetime import timedelta
from typing import Any

from cronsvc.errors import CronsvcError, ScheduleError
from cronsvc.importers.celery_cron import celery_cron
from cronsvc.importers.imported import Flow, Imported, Names, Quoted, duration
from cronsvc.schedule.expand import zone

#: The keys of a beat entry (celery.beat.ScheduleEntry's arguments, as a dict gives them).
ENTRY_KEYS = ("task", "schedule", "args", "kwargs", "options", "relative")
_UTC = frozenset({"UTC", "Etc/UTC", "utc", "Etc/Universal", "Universal", "Zulu"})


def load_app(ref: str) -> tuple[Any, str]:
    """The Celery app ``ref`` names (``proj.celery:app``; ``proj.celery`` alone looks for
    ``app``, then ``celery``), imported from the current directory as ``celery -A`` does,
    and the reference in full (``module:name``).

    This runs the user's own module, as ``celery beat`` would; whatever it raises is
    one message, never a traceback.
    """
    module_name, _, attr = ref.partition(":")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # the user's module: any error is theirs to read
        raise CronsvcError(f"--app {ref}: cannot import {module_name}: "
                           f"{type(exc).__name__}: {exc}") from None
    for name in [attr] if attr else ["app", "celery"]:
        app = getattr(module, name, None)
        if app is not None and hasattr(app, "conf"):
            return app, f"{module_name}:{name}"
    wanted = attr or "app or celery"
    raise CronsvcError(f"--app {ref}: {module_name} has no Celery app named {wanted}")


#: How long a fire of an imported job waits for its task's outcome (``defaults.timeout``).
DEFAULT_TIMEOUT = "1h"


def beat_jobs(app: Any, app_ref: str | None = None) -> Imported:
    """The job file for ``app.conf.beat_schedule``: one ``celery`` job per entry, named
    after it. ``app_ref`` (``proj.celery:app``) is what the workers import to send; the
    target has no ``app`` key without it."""
    out = Imported()
    schedule = app.conf.beat_schedule or {}
    tz, tz_problem = _app_zone(app)
    deadline = app.conf.get("beat_cron_starting_deadline")
    names = Names()
    intervals = []
    for entry_name, entry in schedule.items():
        place = f"beat_schedule[{entry_name!r}]"
        job = _job(out, place, entry, tz, tz_problem)
        if job is None:
            continue
        if "cron" in job and deadline:
            job["starting_deadline"] = duration(float(deadline))
        job["celery"] = _target(entry, app_ref)
        name = names.make(str(entry_name))
        if name != entry_name:
            out.note(place, f"written as job {name!r} (a job name is letters, digits, "
                            "'_', '.' and '-')")
        intervals += [name] if "every" in job else []
        out.jobs[name] = job
    if out.jobs:
        # A dispatched fire waits for its task's outcome: one that never comes back (its
        # Celery worker died mid-task) must end, so every job gets a bound to change.
        out.document = {"defaults": {"timeout": DEFAULT_TIMEOUT}, **out.document}
        out.note("defaults", f"timeout: {DEFAULT_TIMEOUT}: each fire waits this long for "
                 "its task's outcome; set it longer than your longest task")
    if intervals:
        out.note("beat_schedule", f"{', '.join(intervals)}: beat counts an interval from "
                 "its own start; cronsvc fires at whole multiples of it from 1970-01-01 "
                 "UTC (add anchor: to choose), so the first fire may come sooner or later")
    return out


def _app_zone(app: Any) -> tuple[str | None, str | None]:
    """The zone beat reads crontabs in (None for UTC), or why it cannot be known."""
    name = app.conf.timezone
    if not name:
        if app.conf.enable_utc:
            return None, None
        return None, ("app.conf.timezone is unset and enable_utc is False: beat read this "
                      "crontab in the local time of its host; set app.conf.timezone")
    name = str(name)
    try:
        zone(name)
    except ScheduleError as exc:
        return None, f"app.conf.timezone: {exc}"
    return (None if name in _UTC else name), None


def _job(out: Imported, place: str, entry: object, tz: str | None,
         tz_problem: str | None) -> dict[str, Any] | None:
    """The schedule keys of one entry, or None after refusing it."""
    if not isinstance(entry, dict) or not isinstance(entry.get("task"), str):
        out.refuse(place, "expected a dict with task (the task's name) and schedule")
        return None
    unknown = sorted(str(k) for k in entry if k not in ENTRY_KEYS)
    if unknown:
        out.refuse(place, f"unknown key {', '.join(unknown)} (beat takes "
                          f"{', '.join(ENTRY_KEYS)})")
        return None
    problem = _json_problem(entry)
    when, why = _when(entry.get("schedule"), bool(entry.get("relative")))
    problem = why or problem or (tz_problem if when and "cron" in when else None)
    if when is None or problem:
        out.refuse(place, problem or "no schedule")
        return None
    if "cron" in when and tz:
        when["timezone"] = tz
    return when


def _when(schedule: object, relative: bool) -> tuple[dict[str, Any] | None, str | None]:
    """``{"cron": ...}`` or ``{"every": ...}`` for a beat schedule, or why not."""
    from celery.schedules import crontab, solar
    from celery.schedules import schedule as interval

    if isinstance(schedule, crontab):
        cron, problem = celery_cron(schedule)
        if cron is None:
            return None, f"schedule {schedule!r}: {problem}"
        return {"cron": Quoted(cron)}, None
    if isinstance(schedule, solar):
        return None, (f"schedule: solar ({schedule.event} at {schedule.lat}, "
                      f"{schedule.lon}): cronsvc has no schedule by the sun")
    if isinstance(schedule, interval):
        relative = relative or schedule.relative
        schedule = schedule.run_every
    if isinstance(schedule, bool) or not isinstance(schedule, int | float | timedelta):
        return None, (f"schedule of type {type(schedule).__name__}: cronsvc maps crontab, "
                      "timedelta and a number of seconds")
    seconds = schedule.total_seconds() if isinstance(schedule, timedelta) else float(schedule)
    if relative:
        return None, ("relative=True: beat rounds this interval to its own start; "
                      "cronsvc has no such schedule (write a cron for the times you want)")
    if seconds < 1 or seconds * 1000 != round(seconds * 1000):
        return None, f"schedule: every {seconds:g}s: cronsvc intervals are 1s or more, in ms"
    return {"every": duration(seconds)}, None


def _json_problem(entry: dict[str, Any]) -> str | None:
    """Why the entry's args, kwargs or options would not survive JSON, or None: the
    job file holds them as YAML and the celery kind sends them as JSON."""
    for key in ("args", "kwargs", "options"):
        value = entry.get(key)
        if value is None:
            continue
        if key == "args" and not isinstance(value, list | tuple):
            return f"args: expected a list or tuple, got {type(value).__name__}"
        if key != "args" and not isinstance(value, dict):
            return f"{key}: expected a dict, got {type(value).__name__}"
        try:
            json.dumps(value, allow_nan=False)
        except (TypeError, ValueError) as exc:
            return f"{key}: not JSON ({exc}): the job file cannot hold it"
    return None


def _target(entry: dict[str, Any], app_ref: str | None) -> Flow:
    """The ``celery`` key of the job: task, app, queue, args, kwargs, options."""
    options = dict(entry.get("options") or {})
    target = Flow(task=entry["task"])
    if app_ref:
        target["app"] = app_ref
    if options.get("queue"):
        target["queue"] = options.pop("queue")
    # JSON's own types, as the file will read them back (a tuple is a list).
    for key, value in (("args", list(entry.get("args") or ())),
                       ("kwargs", entry.get("kwargs") or {}), ("options", options)):
        if value:
            target[key] = json.loads(json.dumps(value))
    return target
