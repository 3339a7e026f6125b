"""Operator commands of ``cronsvc``: ls, pause, resume, trigger, at, backfill, cancel,
history, queue, dead and status. Each is a few lines over :class:`cronsvc.Client` and
:mod:`cronsvc.cli.render`.

They read the fleet's truth from Redis; the job file is read only for its
``redis:`` section (defaults when there is no file). A broken file is one
warning, not a refusal: an operator may have to pause a job while another job's
typo is being fixed. Exit codes: 0 done, 1 the thing asked for failed or does
not exist, 2 usage error or no Redis.
"""

from __future__ import annotations

import functools
import json
import os
import re
from collections.abc import Callable, Sequence
from itertools import islice
from types import ModuleType
from typing import TYPE_CHECKING, Any, TypeVar

import click

from cronsvc.cli.options import (
    DURATION,
    config_option,
    config_path,
    friendly,
    redis_url_option,
    require_redis_url,
)
from cronsvc.cli.term import echo, echo_json
from cronsvc.errors import ConfigError, CronsvcError, RedisUnavailable, ScheduleError, UnknownFire
from cronsvc.fires import parse_fire

# Modules with Redis, pydantic or croniter behind them are imported when a command runs:
# `cronsvc --help` and the other commands stay quick to start.
if TYPE_CHECKING:
    from cronsvc.client.client import Client
    from cronsvc.config.models import Config

F = TypeVar("F", bound=Callable[..., Any])


class Checked(click.ParamType):
    """A value ``parse`` accepts (its ValueError is the usage error shown)."""

    def __init__(self, name: str, parse: Callable[[str], Any]) -> None:
        self.name = name
        self.parse = parse

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        try:
            return self.parse(value)
        except ValueError as exc:
            self.fail(str(exc), param, ctx)


def _job_name(value: str) -> str:
    from cronsvc.config.models import JOB_NAME

    if not JOB_NAME.fullmatch(value):
        raise ValueError(f"{value!r} is not a job name (letters, digits, '_', '.', '-')")
    return value


def _fire_id(value: str) -> str:
    """``job@due_ms`` or ``job@due_ms#tag`` of a valid job name."""
    _job_name(parse_fire(value)[0])
    return value


def _json_value(value: str) -> Any:
    try:
        return json.loads(value)
    except ValueError as exc:
        raise ValueError(f"{value!r} is not JSON: {exc}") from None


EPILOG = ("Of the job file only its redis: section is used (URL, shards, prefix); if the "
          "file is broken, a warning names its first problem and the command goes on with "
          "that section, or with the defaults if it does not read either.")
JOB, FIRE = Checked("job", _job_name), Checked("fire_id", _fire_id)
JSON = Checked("json", _json_value)
json_option = click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts.")
payload_option = click.option("--payload", type=JSON, default=None, metavar="JSON",
                              help="JSON value handed to the run (CRONSVC_PAYLOAD, ctx.payload).")


def guard(fn: F) -> F:
    """Errors as one line: a Redis lost on the way is exit 2 like one never reached."""

    @functools.wraps(fn)
    def guarded(*args: Any, **kwargs: Any) -> Any:
        import redis

        from cronsvc.store.connection import mask_url

        try:
            return fn(*args, **kwargs)
        except (redis.ConnectionError, redis.TimeoutError) as exc:
            url = click.get_current_context().meta.get("cronsvc.url", "")
            raise RedisUnavailable(f"cannot reach Redis at {mask_url(url)}: {exc}") from exc
        except redis.RedisError as exc:
            raise CronsvcError(f"Redis refused: {exc}") from exc

    return friendly(guarded)  # type: ignore[return-value]


COMMANDS: list[click.Command] = []
"""The operator commands, added to the ``cronsvc`` group by :mod:`cronsvc.cli.main`."""


def operator(name: str | None = None, group: click.Group | None = None,
             cls: type[click.Command] | None = None) -> Callable[[F], F]:
    """A guarded command with --config and --redis-url: a subcommand of ``group``, or
    one of :data:`COMMANDS`."""

    def decorate(fn: F) -> F:
        wrapped = config_option(redis_url_option(guard(fn)))
        if group is not None:
            return group.command(name, cls=cls, epilog=EPILOG)(wrapped)  # type: ignore[return-value]
        command = click.command(name, cls=cls, epilog=EPILOG)(wrapped)
        COMMANDS.append(command)
        return command  # type: ignore[return-value]

    return decorate


_DASH_VALUE = re.compile(r"-\d")


class DashValues(click.Command):
    """A command whose arguments may start with '-' and a digit (``at -5m JOB``): click
    would read ``-5m`` as the options -5 and -m and say "no such option"."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if "--" in args:  # the user separated them already
            return super().parse_args(ctx, args)
        takes_value = {opt for p in self.get_params(ctx) if isinstance(p, click.Option)
                       and not p.is_flag and not p.count for opt in p.opts}
        options: list[str] = []
        values: list[str] = []
        rest = iter(args)
        for arg in rest:
            if arg.startswith("-") and len(arg) > 1 and not _DASH_VALUE.match(arg):
                options.append(arg)
                if arg in takes_value:  # its value comes next, whatever it looks like
                    options.extend(islice(rest, 1))
            else:
                values.append(arg)
        # Options first, then `--`: after it click takes every word as an argument.
        return super().parse_args(ctx, [*options, "--", *values])


def connect_client(config: str | None, redis_url: str | None) -> Client:
    """The client for --config/--redis-url (a subcommand falls back to its group's);
    no job file means one shard, no prefix. A broken job file is one warning: these
    commands need only its redis: section (or the defaults, if that is broken too)."""
    from cronsvc.client.audit import default_actor
    from cronsvc.client.client import Client
    from cronsvc.config.models import Config, load_config

    ctx = click.get_current_context()
    outer = ctx.parent.params if ctx.parent else {}
    path = config_path(config or outer.get("config"))
    try:
        loaded = load_config(path) if os.path.exists(path) else Config(source=path)
    except ConfigError as exc:
        loaded = _despite(path, exc)
    url = require_redis_url(redis_url or outer.get("redis_url"), loaded)
    ctx.meta["cronsvc.url"] = url
    return Client(url, config=loaded, actor=default_actor("cli"))


def _despite(path: str, exc: ConfigError) -> Config:
    """The settings to go on with when the job file at ``path`` is broken, said in one
    line on stderr: its first problem and what is used instead."""
    from cronsvc.config.models import Config, redis_section

    settings = redis_section(path)
    more = len(exc.problems) - 1
    first = " ".join(exc.problems[0].splitlines()) + (
        f" (and {more} more: see `cronsvc validate`)" if more else "")
    using = ("going on with its redis: section" if settings is not None else
             "its redis: section does not read either: going on with 1 shard, no key prefix")
    echo(f"warning: {first}; {using}", err=True)
    return Config(source=path) if settings is None else Config(source=path, redis=settings)


def emit(value: Any, as_json: bool, human: Callable[[ModuleType], str],
         unreadable: Sequence[str] | None = None) -> None:
    """Print ``value`` as JSON, or as ``human(render)`` renders it for people; and on
    stderr, the entries of Redis it left out (``value.unreadable``, or ``unreadable``)."""
    from cronsvc.cli import render

    if as_json:
        echo_json(render.as_json(value))
    else:
        echo(human(render))
    for note in getattr(value, "unreadable", ()) if unreadable is None else unreadable:
        echo(f"left out, not readable: {note}", err=True)


def fail(message: str) -> None:
    """Exit 1 with one line on stderr."""
    raise CronsvcError(message)


@operator("ls")
@click.option("--wide", is_flag=True, help="Every column, nothing cut to fit 120 columns.")
@json_option
def ls(config: str | None, redis_url: str | None, wide: bool, as_json: bool) -> None:
    """Every published job: schedule in words, zone, next fire, last run, pause, the
    job's description from the job file, and where it is declared (in the file, or in
    Python)."""
    client = connect_client(config, redis_url)
    jobs = client.jobs()
    mine = client.config.jobs if client.config else {}
    about = {n: j.description for n, j in mine.items()}
    # Where each job is written: a column of its own once some are declared in Python.
    shown = wide or bool(client.config and client.config.discover)
    at = {n: j.declared_at for n, j in mine.items()} if shown else {}
    emit(jobs, as_json, lambda r: r.jobs(jobs, client.server_ms(), about=about, at=at,
                                         wide=wide))


@operator()
@click.argument("job", type=JOB)
@click.option("--note", default=None, metavar="TEXT", help="Why, shown by `cronsvc ls`.")
@click.option("--wait", type=DURATION, default=None, metavar="DURATION",
              help="Return only once its runs claimed before the pause have ended.")
def pause(config: str | None, redis_url: str | None, job: str, note: str | None,
          wait: float | None) -> None:
    """Stop new fires of JOB on every worker now (triggers and `at` runs still run)."""
    client = connect_client(config, redis_url)
    done = client.pause(job, note, wait=wait)
    emit(done, False, lambda r: r.pause(done, client.server_ms(), client.zones().get(job, "UTC")))


@operator()
@click.argument("job", type=JOB)
@click.option("--catch-up", is_flag=True,
              help="Run the fires missed while paused, as the job's catch_up policy says.")
def resume(config: str | None, redis_url: str | None, job: str, catch_up: bool) -> None:
    """Let JOB fire again from now (or from when it was paused, with --catch-up)."""
    done = connect_client(config, redis_url).resume(job, catch_up=catch_up)
    if done.paused_in_file:
        ended = "its runtime pause ended, but " if done else ""
        fail(f"{job}: {ended}it is paused in the job file (paused: true): remove that line")
    if not done:
        echo(f"{job} was not paused")
        return
    echo(f"resumed {job}")
    if catch_up:
        more = f" (the newest {len(done.requeued)}: older ones left out)" if done.truncated else ""
        echo(f"catch_up {done.catch_up}: {len(done.requeued)} missed fire(s) queued "
             f"again{more}")
        for fid in done.requeued:
            echo(f"  {fid}")


@operator()
@click.argument("job", type=JOB)
@payload_option
def trigger(config: str | None, redis_url: str | None, job: str, payload: Any) -> None:
    """Run JOB once now beside its schedule; prints the new fire id."""
    client = connect_client(config, redis_url)
    echo(client.trigger(job, payload))
    if client.job(job).paused:
        echo(f"note: {job} is paused; a trigger runs anyway", err=True)


@operator(cls=DashValues)
@click.argument("when", metavar="WHEN")
@click.argument("job", type=JOB)
@payload_option
@click.option("--tz", default=None, metavar="ZONE",
              help="Zone of an ISO time written without an offset (default UTC).")
def at(config: str | None, redis_url: str | None, when: str, job: str, payload: Any,
       tz: str | None) -> None:
    """Run JOB once at WHEN (ISO 8601 time, +30s, +10m, +2h); prints the fire id.

    WHEN is at most 10 years from now; a time in the past (-5m too) is refused.
    """
    from cronsvc.schedule.when import parse_when

    client = connect_client(config, redis_url)
    try:
        due = parse_when(when, client.server_ms(), tz)
    except (ValueError, ScheduleError) as exc:
        raise click.BadParameter(str(exc), param_hint="WHEN") from None
    echo(client.enqueue(job, due, payload))


@operator(cls=DashValues)
@click.argument("target", metavar="JOB_OR_SCHEDULE")
@click.option("--from", "start", required=True, metavar="TIME",
              help="The first due time: ISO 8601 (a date alone is its midnight), or -2d, -6h "
                   "before now.")
@click.option("--to", "end", default="now", show_default=True, metavar="TIME",
              help="The last due time (included); one past now is now.")
@click.option("--tz", default=None, metavar="ZONE",
              help="Zone of an ISO time written without an offset (default: the schedule's).")
@click.option("--dry-run", is_flag=True, help="Only list the fires: which would run, and why "
                                               "the others are left alone.")
@click.option("--max-concurrent", type=click.IntRange(min=1), default=1, show_default=True,
              help="Backfilled fires running at once at most (the job's overlap and limits "
                   "still hold).")
@click.option("--note", default=None, metavar="TEXT", help="Why, for the audit log.")
@json_option
def backfill(config: str | None, redis_url: str | None, target: str, start: str, end: str,
             tz: str | None, dry_run: bool, max_concurrent: int, note: str | None,
             as_json: bool) -> None:
    """Run the fires of JOB_OR_SCHEDULE due in a past range that did not run.

    Fires queued, in flight, dead, or recorded as run (35 days back) are left alone, so
    the same backfill again runs nothing twice. The fires run under their own ids, one
    at a time by default, oldest first; the command returns when the last one ended
    (stopped half way, the same command again goes on). Exit 1 if one died or did not run.
    """
    from cronsvc.cli import render

    client = connect_client(config, redis_url)
    zone = "UTC"

    def planned(plan: Any) -> None:
        nonlocal zone
        zone = plan.timezone
        if not as_json:
            echo(render.backfill_plan(plan))

    def told(f: Any) -> None:
        if not as_json:
            echo(render.backfill_fire(f, zone))

    try:
        done = client.backfill(target, start, end, dry_run=dry_run, tz=tz,
                               max_concurrent=max_concurrent, note=note, planned=planned,
                               progress=told)
    except KeyboardInterrupt:
        raise CronsvcError("stopped: fires queued already still run; the same command again "
                           "goes on where this one stopped") from None
    if done.dry_run or not done.to_run:
        if as_json:
            echo_json(render.as_json(done))
        return
    emit(done, as_json, lambda r: r.backfill_done(done))
    if done.count("dead") + done.count("not run"):
        raise SystemExit(1)


@operator()
@click.argument("fire", type=FIRE, metavar="FIRE_ID")
def cancel(config: str | None, redis_url: str | None, fire: str) -> None:
    """Unqueue a fire that has not started (exit 1 if it is not queued)."""
    client = connect_client(config, redis_url)
    if not client.cancel(fire):
        why = {"running": "it is running", "dead": "it is dead (see `cronsvc dead`)",
               "done": "it ran already (see `cronsvc history`)",
               "unknown": "no such fire"}[client.fire_state(fire)]
        raise UnknownFire(f"cannot cancel {fire}: not queued: {why}")
    echo(f"cancelled {fire}")


@operator()
@click.argument("job", type=JOB)
@click.option("-n", "count", type=click.IntRange(min=1), default=20, show_default=True,
              help="How many fires to show (each with all its attempts), newest first.")
@json_option
def history(config: str | None, redis_url: str | None, job: str, count: int,
            as_json: bool) -> None:
    """The last runs of JOB (and the fires it skipped, with the reason)."""
    client = connect_client(config, redis_url)
    records = client.history(job, count)
    emit(records, as_json,
         lambda r: r.history(records, client.server_ms(), client.zones().get(job, "UTC")))


@operator()
@click.option("-n", "limit", type=click.IntRange(min=0), default=20, show_default=True,
              help="Fires listed at most in each part.")
@click.option("--by-job", is_flag=True, help="One line a job: due, ahead, in flight, dead.")
@json_option
def queue(config: str | None, redis_url: str | None, limit: int, by_job: bool,
          as_json: bool) -> None:
    """Fires due now, planned ahead and in flight (lease deadlines, workers)."""
    client = connect_client(config, redis_url)
    if by_job:
        rows, cut = client.queue_by_job()
        emit(rows, as_json, lambda r: r.queue_by_job(rows, cut, client.server_ms()))
        return
    view = client.queue(limit)
    emit(view, as_json, lambda r: r.queue(view, client.zones()))


@operator()
@click.argument("fire", type=FIRE, metavar="FIRE_ID")
@click.option("--follow", "-f", is_flag=True,
              help="Print its output as it runs (retries too), then its attempts; exit 0 "
                   "if it succeeded, 1 if not.")
@json_option
def show(config: str | None, redis_url: str | None, fire: str, follow: bool,
         as_json: bool) -> None:
    """One fire: where it is now, and every attempt with its worker, exit code, duration,
    reason and output."""
    client = connect_client(config, redis_url)
    if follow:
        from cronsvc.cli.follow import follow as follow_fire

        raise SystemExit(follow_fire(client, fire))
    view = client.fire(fire)
    emit(view, as_json,
         lambda r: r.fire(view, client.server_ms(), client.zones().get(view.job, "UTC")))


@click.group(invoke_without_command=True, epilog=EPILOG)
@config_option
@redis_url_option
@click.option("--job", type=JOB, default=None, help="Only this job's dead fires.")
@json_option
@click.pass_context
@guard
def dead(ctx: click.Context, config: str | None, redis_url: str | None, job: str | None,
         as_json: bool) -> None:
    """Fires out of attempts, most recently dead first; `retry` or `purge` them."""
    if ctx.invoked_subcommand is not None:
        return
    client = connect_client(config, redis_url)
    found = client.dead(job)
    emit(found, as_json, lambda r: r.dead(found, client.server_ms(), client.zones()))


COMMANDS.append(dead)


@operator("retry", group=dead)
@click.argument("fire", type=FIRE, metavar="FIRE_ID")
def dead_retry(config: str | None, redis_url: str | None, fire: str) -> None:
    """Queue a dead fire again now, with the job's full set of attempts."""
    connect_client(config, redis_url).dead_retry(fire)
    echo(f"queued {fire} again")


@operator("purge", group=dead)
@click.option("--job", type=JOB, default=None, help="Only this job's dead fires.")
def dead_purge(config: str | None, redis_url: str | None, job: str | None) -> None:
    """Forget dead fires (all, or one job's) with their attempts and payloads."""
    ctx = click.get_current_context()
    n = connect_client(config, redis_url).dead_purge(
        job or (ctx.parent.params.get("job") if ctx.parent else None))
    echo(f"purged {n} dead fire{'' if n == 1 else 's'}")


@operator()
@click.option("-n", "limit", type=click.IntRange(min=1), default=50, show_default=True,
              help="Entries listed at most, newest first.")
@json_option
def malformed(config: str | None, redis_url: str | None, limit: int, as_json: bool) -> None:
    """Entries of Redis that were not what their key holds (a queue member that is no fire
    id, a schedule line that is none), set aside by the process that met them."""
    client = connect_client(config, redis_url)
    aside = client.malformed(limit)
    emit(aside, as_json, lambda r: r.malformed(aside, client.server_ms()))


@operator()
@json_option
def status(config: str | None, redis_url: str | None, as_json: bool) -> None:
    """Live planners and workers, Redis version and persistence; warns of risky settings."""
    found = connect_client(config, redis_url).status()
    emit(found, as_json, lambda r: r.status(found))
    for warning in found.warnings:
        echo(f"WARNING: {warning}", err=True)
