"""``cronsvc schedule``: runtime schedules from the shell, a few lines each over
:class:`cronsvc.Client` (add, set, rm, show, ls, pause, resume)."""

from __future__ import annotations

from typing import Any

import click

from cronsvc.cli.ops import (
    EPILOG,
    JOB,
    JSON,
    connect_client,
    emit,
    fail,
    json_option,
    operator,
)
from cronsvc.cli.options import config_option, redis_url_option
from cronsvc.cli.term import echo


@click.group(epilog=EPILOG)
@config_option
@redis_url_option
def schedule(config: str | None, redis_url: str | None) -> None:
    """Runtime schedules: when a job of the file fires for one caller, with a payload."""


def _fields(fn: Any) -> Any:
    """The options that define a schedule (add and set)."""
    for option in reversed([
        click.option("--job", type=JOB, required=True, help="The job of the file it runs."),
        click.option("--cron", default=None, metavar="EXPR", help="A cron expression."),
        click.option("--every", default=None, metavar="DURATION",
                     help="Or an interval: 90m, 1h30m, 10s (at least 1s)."),
        click.option("--anchor", default=None, metavar="ISO_TIME",
                     help="With --every: fires at anchor + k x every (default: the epoch)."),
        click.option("--tz", "timezone", default="UTC", show_default=True, metavar="ZONE",
                     help="Zone of the cron expression and of times written without one."),
        click.option("--start", default=None, metavar="ISO_TIME", help="No fire before."),
        click.option("--end", default=None, metavar="ISO_TIME", help="No fire after."),
        click.option("--max-runs", type=click.IntRange(min=1), default=None,
                     help="Fires in all, counted from --start (default: now)."),
        click.option("--payload", type=JSON, default=None, metavar="JSON",
                     help="Handed to each run (CRONSVC_PAYLOAD, ctx.payload); 64 KiB at most."),
        click.option("--paused", is_flag=True, help="Create or keep it paused."),
        click.option("--catch-up", type=click.Choice(["all", "latest", "none"]), default=None,
                     help="Instead of the job's."),
        click.option("--starting-deadline", default=None, metavar="DURATION",
                     help="Instead of the job's."),
        click.option("--jitter", default=None, metavar="DURATION",
                     help="A fixed offset of up to this, per schedule."),
        click.option("--overlap", type=click.Choice(["allow", "forbid", "replace", "queue"]),
                     default=None, help="Instead of the job's (per schedule)."),
        click.option("--actor", default=None, metavar="NAME",
                     help="Who changes it, in the schedule and the audit log (default: "
                          "cli:<OS user>)."),
    ]):
        fn = option(fn)
    return fn


def _upsert(config: str | None, redis_url: str | None, sid: str, create: bool,
            fields: dict[str, Any]) -> None:
    from cronsvc.errors import UnknownSchedule

    client = connect_client(config, redis_url)
    actor = fields.pop("actor", None)
    if actor:  # the schedule and the audit log name the same actor
        client = client.acting_as(actor)
    if create:
        try:
            client.get_schedule(sid)
        except UnknownSchedule:
            pass
        else:
            fail(f"schedule {sid!r} exists; `cronsvc schedule set` changes it")
    outcome = client.upsert_schedule(sid, **fields)
    echo(f"{outcome} {sid}")


@operator("add", group=schedule)
@click.argument("sid", metavar="ID")
@_fields
def add(config: str | None, redis_url: str | None, sid: str, **fields: Any) -> None:
    """Create a schedule (exit 1 if one with this id exists)."""
    _upsert(config, redis_url, sid, True, fields)


@operator("set", group=schedule)
@click.argument("sid", metavar="ID")
@_fields
def set_(config: str | None, redis_url: str | None, sid: str, **fields: Any) -> None:
    """Create a schedule or make it what is given (says created, changed or unchanged)."""
    _upsert(config, redis_url, sid, False, fields)


@operator("rm", group=schedule)
@click.argument("sid", metavar="ID")
def rm(config: str | None, redis_url: str | None, sid: str) -> None:
    """Delete a schedule; its fires not started yet go too (exit 1 if there is none)."""
    if not connect_client(config, redis_url).delete_schedule(sid):
        fail(f"no schedule {sid!r}")
    echo(f"deleted {sid}")


@operator("show", group=schedule)
@click.argument("sid", metavar="ID")
@json_option
def show(config: str | None, redis_url: str | None, sid: str, as_json: bool) -> None:
    """One schedule: every field and its next fires."""
    client = connect_client(config, redis_url)
    found = client.get_schedule(sid)
    emit(found.as_dict() if as_json else found, as_json,
         lambda r: r.schedule(found, client.server_ms()))


@operator("ls", group=schedule)
@click.option("--job", type=JOB, default=None, help="Only the schedules of this job.")
@click.option("--prefix", default=None, metavar="TEXT", help="Only ids that start so.")
@click.option("--limit", type=click.IntRange(min=1, max=10_000), default=100,
              show_default=True, help="About this many per page.")
@click.option("--cursor", default=None, metavar="CURSOR",
              help="Where the previous page ended (it prints the next one).")
@json_option
def ls(config: str | None, redis_url: str | None, job: str | None, prefix: str | None,
       limit: int, cursor: str | None, as_json: bool) -> None:
    """One page of schedules, read without loading them all; `--cursor` for the next."""
    client = connect_client(config, redis_url)
    page = client.schedules(job=job, prefix=prefix, cursor=cursor, limit=limit)
    emit({"schedules": [s.as_dict() for s in page.schedules], "cursor": page.cursor},
         as_json, lambda r: r.schedules(page.schedules, client.server_ms(), page.cursor),
         page.unreadable)


@operator("pause", group=schedule)
@click.argument("sid", metavar="ID")
def pause(config: str | None, redis_url: str | None, sid: str) -> None:
    """Stop a schedule's fires until it is resumed."""
    outcome = connect_client(config, redis_url).pause_schedule(sid)
    echo(f"paused {sid}" if outcome != "unchanged" else f"{sid} was paused already")


@operator("resume", group=schedule)
@click.argument("sid", metavar="ID")
def resume(config: str | None, redis_url: str | None, sid: str) -> None:
    """Fire again from now on."""
    outcome = connect_client(config, redis_url).resume_schedule(sid)
    echo(f"resumed {sid}" if outcome != "unchanged" else f"{sid} was not paused")

