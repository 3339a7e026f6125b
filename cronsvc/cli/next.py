"""What ``cronsvc next`` shows: a job's (or an expression's, or ``every 90m``'s) upcoming
fires, with DST notes."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import click

from cronsvc.clock import dt_to_ms, iso_utc, now_dt
from cronsvc.durations import parse_duration
from cronsvc.errors import UnknownJob
from cronsvc.schedule.expand import Fire, JobLike, Spec, upcoming, zone
from cronsvc.schedule.fields import validate_cron
from cronsvc.schedule.words import describe_schedule, schedule_text

SEARCH_YEARS = 50


def find_spec(job_or_expr: str, config: str, tz: str | None) -> JobLike:
    """The job named ``job_or_expr`` in the file at ``config``, else the expression itself.

    Job names hold no spaces and never start with ``@``, cron expressions always
    do one or the other, so the file is only read for a name.
    """
    text = job_or_expr.strip()
    if text.lower().startswith("every "):
        try:
            every = parse_duration(text[6:])
        except ValueError as exc:
            raise click.BadParameter(f"{text!r}: {exc}", param_hint="JOB_OR_EXPR") from None
        zone(tz or "UTC")
        return Spec(every_ms=round(every * 1000), timezone=tz or "UTC")
    if " " in text or text.startswith("@"):
        validate_cron(text)
        zone(tz or "UTC")
        return Spec(cron=text, timezone=tz or "UTC")
    from cronsvc.config.models import load_config

    jobs = load_config(config).jobs
    if text not in jobs:
        raise UnknownJob(f"{config}: no job named {text!r}, and not a cron expression")
    if tz is not None:
        raise click.UsageError(f"--tz applies to cron expressions; job {text!r} has its own zone")
    return jobs[text]


def parse_after(value: str | None) -> datetime:
    """--after as an aware datetime (UTC when no zone is written); now when absent."""
    if value is None:
        return now_dt()
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise click.BadParameter(f"{value!r} is not an ISO 8601 time",
                                 param_hint="--after") from None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def _record(fire: Fire) -> dict[str, str]:
    record = {"utc": iso_utc(dt_to_ms(fire.utc)), "local": fire.local.isoformat()}
    if fire.note:
        record["note"] = fire.note
    return record


def _millis(t: datetime) -> str:
    return f".{t.microsecond // 1000:03d}" if t.microsecond else ""


def render(job: JobLike, after: datetime, count: int, as_json: bool) -> str:
    """The listing: aligned lines for people, or a JSON list of fires."""
    fires = upcoming(job, after, count, SEARCH_YEARS)
    if as_json:
        return json.dumps([_record(f) for f in fires if f.runs], indent=2)
    spec = Spec.of(job)
    if spec.cron is None and spec.every_ms is None:
        return f"{job.name}: no schedule; it runs when triggered (cronsvc trigger, cronsvc at)"
    name = f"{job.name}: " if job.name else ""
    bounded = (spec.start_ms, spec.end_ms, spec.max_runs) != (None, None, None)
    what = describe_schedule(spec) if bounded else schedule_text(spec)
    lines = [f"{name}{what} ({job.timezone}), after {iso_utc(dt_to_ms(after))}"]
    for fire in fires:
        local = fire.local.strftime("%Y-%m-%d %H:%M:%S") + _millis(fire.local)
        offset = fire.local.strftime("%z")
        mark = "  " if fire.runs else "- "
        line = f"{mark}{local} {offset}  {iso_utc(dt_to_ms(fire.utc))}"
        lines.append(f"{line}  {fire.note}" if fire.note else line)
    if not any(f.runs for f in fires):
        lines.append(f"no fire in the next {SEARCH_YEARS} years" + (
            " (past its end or max_runs)" if bounded else ""))
    return "\n".join(lines)
