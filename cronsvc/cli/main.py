"""The ``cronsvc`` command: a thin click group over the library.

Each command is a few lines calling into the package. Errors derived from
:class:`CronsvcError` become one line on stderr and a non-zero exit, never a
traceback.
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, Any

import click

from cronsvc import __version__
from cronsvc.cli import audit, imports, notify, ops, schedules, web  # noqa: F401 - audit joins ops.COMMANDS
from cronsvc.cli.options import (
    DURATION,
    config_option,
    config_path,
    friendly,
    log_format_option,
    metrics_host,
    metrics_port_option,
    name_option,
    redis_url_option,
    require_redis_url,
)
from cronsvc.cli.term import echo, echo_json

if TYPE_CHECKING:  # the commands import them when they run: `cronsvc --help` stays quick
    from redis import Redis

    from cronsvc.config.jobfile import JobFile



@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="cronsvc")
def main() -> None:
    """Distributed cron on Redis."""


# Commands are added below, one small function each.


@main.command()
@click.argument("file", required=False, metavar="[FILE]")
@config_option
@click.option("--imports", is_flag=True,
              help="Also import every call target (in a child process) and check that it "
                   "is callable.")
@click.option("--import-timeout", type=click.FloatRange(min=0.1), default=10.0,
              show_default=True, metavar="SECONDS",
              help="How long one call target may take to import.")
@click.option("--strict", is_flag=True, help="Warnings count as errors (exit 1).")
@click.option("--json", "as_json", is_flag=True,
              help="Print {file, jobs, errors, warnings} as JSON (exit 1 on an error).")
@friendly
def validate(file: str | None, config: str | None, imports: bool,
             import_timeout: float, strict: bool, as_json: bool) -> None:
    """Check a job file and list every problem in it (exit 1 if there is one).

    Warns (exit 0) of a schedule that never fires, of a call into os, subprocess or
    builtins, which runs any program (the job file is code, guard it like code), and of
    a fixed-time job whose time does not exist or happens twice on a DST night of the
    next 12 months. With --imports, names the jobs whose target is async.
    """
    import json

    from cronsvc.clock import SYSTEM
    from cronsvc.config.check import check
    from cronsvc.errors import ConfigError

    path = file or config_path(config)
    try:
        loaded, warnings, async_jobs, errors = check(path, SYSTEM.now_ms(), imports=imports,
                                                     timeout=import_timeout)
    except ConfigError as exc:  # nothing of the file reads
        loaded, warnings, async_jobs, errors = None, [], None, tuple(exc.problems)
    if strict:
        errors, warnings = (*errors, *(w.replace(": warning: ", ": ", 1) for w in warnings)), []
    if as_json:
        echo_json(json.dumps({"file": path, "jobs": None if errors or loaded is None
                              else len(loaded.jobs),
                              **({} if async_jobs is None else {"async": async_jobs}),
                              "errors": list(errors), "warnings": warnings}, indent=2))
        if errors:
            raise SystemExit(1)
        return
    if errors:  # with the warnings of the rest: every problem in one run
        raise ConfigError([*errors, *warnings])
    assert loaded is not None
    for line in warnings:
        echo(line, err=True)
    count = len(loaded.jobs)
    more = f" ({len(warnings)} warning{'' if len(warnings) == 1 else 's'})" if warnings else ""
    checked = ", every target imports" if imports else ""
    if async_jobs:
        checked += f" ({len(async_jobs)} async: {', '.join(async_jobs)})"
    python = len(loaded.declared_in_python)
    declared = f" ({python} declared in Python)" if loaded.discover else ""
    echo(f"{path}: {count} job{'' if count == 1 else 's'}{declared} OK{checked}{more}")


@main.command()
@config_option
@redis_url_option
@click.option("--horizon", type=DURATION, default=None,
              help="How far ahead to plan (default: planner.horizon in the file, 2h).")
@click.option("--tick", type=DURATION, default=None,
              help="Time between two ticks (default: planner.tick in the file, 60s).")
@log_format_option
@name_option
@metrics_port_option
@friendly
def planner(config: str | None, redis_url: str | None, horizon: float | None,
            tick: float | None, log_format: str, name: str | None,
            metrics_port: int | None) -> None:
    """Publish the job file and queue its fires ahead; reload on change or SIGHUP."""
    from cronsvc.metrics.counters import start_metrics
    from cronsvc.planner.planner import Planner

    job_file, client = _role(config, redis_url, log_format, name or "planner")
    Planner(job_file, client, horizon=horizon, tick=tick, planner_id=name,
            metrics=start_metrics(metrics_port, metrics_host())).run_forever()


@main.command()
@config_option
@redis_url_option
@log_format_option
@name_option
@friendly
def notifier(config: str | None, redis_url: str | None, log_format: str,
             name: str | None) -> None:
    """Route the outbox: tell the job file's notify channels what happens, queue chained
    jobs and spread automatic pauses to every shard (planners do this too: one at a time
    acts). Run one beside the workers to hear that no planner is live."""
    import threading

    from cronsvc.notify.notifier import Notifier, log
    from cronsvc.process.signals import on_stop_signals

    job_file, client = _role(config, redis_url, log_format, name or "notifier")
    done = threading.Event()

    def reload() -> None:
        fresh = job_file.reload(force=True)
        if fresh is not None:
            log.info("reloaded %s: %d jobs, %d channels", job_file, len(fresh.jobs),
                     len(fresh.notify))

    sender = Notifier(client, lambda: job_file.config, role=name or "notifier",
                      watch_planners=True)
    restore = on_stop_signals(done.set, reload)
    job_file.watch(reload)
    sender.start()
    try:
        while not done.wait(1.0):
            pass
    finally:
        sender.stop()
        job_file.stop()
        restore()


def _role(config: str | None, redis_url: str | None, log_format: str,
          log_name: str) -> tuple[JobFile, Redis]:
    """What a planner, worker or notifier starts from: its job file, the one owner of it in
    the process; logging set up; and its Redis connection."""
    from cronsvc.config.jobfile import JobFile
    from cronsvc.process.logs import setup_logging
    from cronsvc.store.connection import connect

    job_file = JobFile(config_path(config))
    loaded = job_file.config
    url = require_redis_url(redis_url, loaded)
    setup_logging(log_format, log_name)
    return job_file, connect(url, cluster=loaded.redis.cluster or None)


@main.command()
@config_option
@redis_url_option
@click.option("--concurrency", "-c", type=click.IntRange(min=1), default=None,
              help="Jobs run at once (default: worker.concurrency in the file, 4).")
@click.option("--async-concurrency", type=click.IntRange(min=1), default=None,
              help="Async call jobs awaited at once on the worker's event loop, beside "
                   "--concurrency (default: worker.async_concurrency in the file, 100).")
@click.option("--prefetch-multiplier", type=click.IntRange(min=1, max=100), default=None,
              help="Fires held at most per slot: more due at once than the fleet has free "
                   "slots are prefetched to wait in a worker for one (default: "
                   "worker.prefetch_multiplier in the file, 4; 1: no more than its slots).")
@click.option("--processes", "-p", type=click.IntRange(min=1), default=None,
              help="Claim-and-run processes under one supervisor, each with --concurrency "
                   "slots (default: worker.processes in the file, else one per core it may "
                   "run on).")
@click.option("--lease", type=DURATION, default=None,
              help="Lease of a claimed fire, renewed while it runs (default 30s).")
@click.option("--grace", type=DURATION, default=None,
              help="On SIGTERM, how long running jobs may finish (default 30s).")
@click.option("--pools", default=None, metavar="NAME,...",
              help="The pools whose fires this worker runs (default: worker.pools in the "
                   "file, default).")
@click.option("--host", "host", default=None, metavar="NAME",
              help="The host it runs each-host jobs for (default: worker.host in the file, "
                   "then this machine's name).")
@click.option("--reload", "reload", is_flag=True,
              help="Run the worker afresh when the code of its jobs changes: a new worker "
                   "starts, then the old one finishes its running jobs and exits.")
@log_format_option
@name_option
@metrics_port_option
@friendly
def worker(config: str | None, redis_url: str | None, concurrency: int | None,
           async_concurrency: int | None, prefetch_multiplier: int | None,
           processes: int | None, lease: float | None,
           grace: float | None, pools: str | None, host: str | None, reload: bool,
           log_format: str, name: str | None, metrics_port: int | None) -> None:
    """Claim due fires and run them; reload the file on change or SIGHUP.
    SIGTERM: finish running jobs; again: give them back."""
    from cronsvc.config.models import host_name, served_pool
    from cronsvc.errors import BadArgument
    from cronsvc.metrics.counters import start_metrics
    from cronsvc.presence import process_id
    from cronsvc.process.loaded import loaded_code
    from cronsvc.process.signals import on_stop_signals
    from cronsvc.run.processes import die_with_parent
    from cronsvc.worker import heap
    from cronsvc.worker.prefork import Forked
    from cronsvc.worker.worker import Worker

    options = dict(config=config_path(config), redis_url=redis_url, concurrency=concurrency,
                   async_concurrency=async_concurrency,
                   prefetch_multiplier=prefetch_multiplier, lease=lease, grace=grace,
                   pools=pools, host=host, log_format=log_format)
    if reload:
        sys.exit(_reloading(name, metrics_port, processes=processes, **options))
    forked = Forked.from_env()  # one process of a supervisor's
    job_file, client = _role(config, redis_url, log_format, (name or "worker").split("@")[0])
    count = processes or job_file.config.worker.processes or _cores()
    if forked is None and count > 1:
        sys.exit(_prefork(job_file, client, name or process_id(), count, metrics_port,
                          options))
    served = None
    if pools is not None:
        try:
            served = tuple(dict.fromkeys(served_pool(p.strip()) for p in pools.split(",")))
        except ValueError as exc:
            raise BadArgument(f"--pools: {exc}") from None
    try:
        host = None if host is None else host_name(host)
    except ValueError as exc:
        raise BadArgument(f"--host: {exc}") from None
    worker_id = name or process_id()
    if forked is not None:
        forked.attach(die_with_parent)
        worker_id = forked.worker_id
    # Under --reload: the code it runs (the supervisor's first process tells it).
    reporter = loaded_code(job_file.config, forked.of if forked else worker_id)
    w = Worker(job_file, client, concurrency=concurrency,
               async_concurrency=async_concurrency, lease=lease, grace=grace,
               prefetch_multiplier=prefetch_multiplier, worker_id=worker_id,
               metrics=start_metrics(metrics_port, metrics_host()),
               pools=served, host=host,
               watchdog=forked.watchdog_end() if forked else None,
               report=forked.send if forked else None)
    on_stop_signals(w.stop, reload=w.request_reload)
    if reporter is not None:
        reporter.start(lambda: len(w.running()))
    heap.settle()  # what it loaded, out of the cycle collector's sight
    w.run_forever()


def _cores() -> int:
    """The cores this process may run on (a container's cpuset, not the host's count)."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def _as_given(options: dict[str, Any]) -> list[str]:
    """``cronsvc worker`` with each option given, as it was given."""
    argv = [sys.executable, "-m", "cronsvc", "worker"]
    for key, value in options.items():
        if value is not None:
            argv += [f"--{key.replace('_', '-')}", str(value)]
    return argv


def _prefork(job_file: JobFile, client: Redis, worker_id: str, processes: int,
             metrics_port: int | None, options: dict[str, Any]) -> int:
    """``cronsvc worker --processes N``: a supervisor of N worker processes that the fleet
    sees as one worker (cronsvc/worker/prefork.py)."""
    from cronsvc.keys import all_shards
    from cronsvc.process.loaded import REPORT_ENV
    from cronsvc.process.signals import on_stop_signals
    from cronsvc.worker.prefork import Prefork

    loaded = job_file.config

    def argv(index: int) -> list[str]:  # process i serves its metrics on the port + i - 1
        port = None if metrics_port is None else metrics_port + index - 1 if metrics_port else 0
        return _as_given({**options, "processes": 1, "metrics_port": port})

    report = os.environ.pop(REPORT_ENV, None)  # under --reload: the first process reports
    os.environ["CRONSVC_METRICS_HOST"] = metrics_host()  # its processes inherit it
    grace = options["grace"]
    sup = Prefork(argv, processes, worker_id, client,
                  all_shards(loaded.redis.shards, loaded.redis.prefix)[0],
                  stop_timeout=(loaded.worker.grace if grace is None else grace) + 30,
                  first_env={REPORT_ENV: report} if report else {})
    on_stop_signals(sup.handle_stop, reload=sup.handle_reload)
    return sup.run()


def _reloading(name: str | None, metrics_port: int | None, **options: Any) -> int:
    """``cronsvc worker --reload``: a supervisor that runs ``cronsvc worker`` with the
    ``options`` given afresh when its code changes (cronsvc/process/reload.py)."""
    import json

    from cronsvc.errors import BadArgument
    from cronsvc.keys import all_shards
    from cronsvc.process.reload import Reloader
    from cronsvc.process.signals import on_stop_signals
    from cronsvc.store.faults import REDIS_ERRORS

    if metrics_port is not None:
        raise BadArgument("--metrics-port: not with --reload (two workers share a moment "
                          "during a swap, and one port)")
    job_file, client = _role(options["config"], options["redis_url"],
                             options["log_format"], (name or "worker").split("@")[0])
    loaded = job_file.config
    grace = options["grace"]
    argv = _as_given(options)
    keys = all_shards(loaded.redis.shards, loaded.redis.prefix)[0]

    def registered(worker_id: str, pid: int) -> bool:
        """Whether that worker process wrote its presence: it claims from then on."""
        try:
            raw = client.hget(keys.worker_info, worker_id)
        except REDIS_ERRORS:
            return False
        try:
            return raw is not None and json.loads(raw).get("pid") == pid
        except (ValueError, AttributeError):  # not a worker's presence
            return False

    reloader = Reloader(argv, name, registered,
                        stop_timeout=(loaded.worker.grace if grace is None else grace) + 30)
    on_stop_signals(reloader.handle_signal)
    return reloader.run()


@main.command()
@config_option
@redis_url_option
@click.option("--workers", "-w", type=click.IntRange(min=0), default=2, show_default=True,
              help="Worker processes to start.")
@click.option("--concurrency", "-c", type=click.IntRange(min=1), default=None,
              help="Jobs run at once per worker (default: worker.concurrency in the file).")
@click.option("--web-port", type=click.IntRange(1, 65535), default=8080, show_default=True,
              help="Port of the dashboard and HTTP API (on 127.0.0.1).")
@click.option("--no-web", is_flag=True, help="Do not start the dashboard.")
@click.option("--reload", "reload", is_flag=True,
              help="Run each worker afresh when the code of its jobs changes (as "
                   "`cronsvc worker --reload`): for development.")
@web.web_options
@log_format_option
@metrics_port_option
@friendly
def up(config: str | None, redis_url: str | None, workers: int, concurrency: int | None,
       web_port: int, no_web: bool, reload: bool, allowed_hosts: tuple[str, ...],
       trusted_proxies: tuple[str, ...], log_format: str, metrics_port: int | None) -> None:
    """Planner, workers and the dashboard in one command, with an embedded Redis if none
    is given.

    With --metrics-port P the planner serves metrics on P and worker i on P+i.
    """
    from cronsvc.config.models import load_config
    from cronsvc.process.logs import setup_logging
    from cronsvc.process.signals import on_stop_signals
    from cronsvc.process.up import Supervisor

    path = config_path(config)
    loaded = load_config(path)
    url = redis_url or os.environ.get("CRONSVC_REDIS_URL") or loaded.redis.url or None
    if url:
        from cronsvc.store.connection import connect

        # Unreachable: one line and exit 2 before any child starts.
        connect(url, cluster=loaded.redis.cluster or None).close()
    setup_logging(log_format, "up")
    if metrics_port and metrics_port + workers > 65535:
        raise click.BadParameter(f"{metrics_port} + {workers} workers is past port 65535",
                                 param_hint="--metrics-port")
    if reload and metrics_port is not None:
        raise click.BadParameter("not with --reload (a worker and its successor share a "
                                 "moment during a swap, and one port)",
                                 param_hint="--metrics-port")
    os.environ["CRONSVC_METRICS_HOST"] = metrics_host()  # its planner and workers inherit it
    if not no_web:  # taken: one line and exit 1 before anything starts, nothing claimed up
        from cronsvc.web.server import listen

        listen("127.0.0.1", web_port, "--web-port PORT (make run PORT=...), or --no-web").close()
    sup = Supervisor(path, url, workers, concurrency=concurrency, log_format=log_format,
                     metrics_port=metrics_port, stop_timeout=loaded.worker.grace + 30,
                     web_port=None if no_web else web_port,
                     web_args=web.passed_on(allowed_hosts, trusted_proxies), reload=reload)
    on_stop_signals(sup.handle_signal)
    sys.exit(sup.run())


@main.command()
@click.argument("file", required=False, metavar="[FILE]")
@config_option
@redis_url_option
@friendly
def publish(file: str | None, config: str | None, redis_url: str | None) -> None:
    """Make a job file the published one now, even if planners hold a newer one.

    Planners publish their own file when it changes or is new; an older file that
    comes back (a rollback while newer planners still run) waits for them to stop.
    This publishes it at once; the planners holding another file then yield to it.
    """
    from cronsvc.client.audit import default_actor
    from cronsvc.client.client import Client
    from cronsvc.config.models import load_config

    path = file or config_path(config)
    loaded = load_config(path)
    client = Client(require_redis_url(redis_url, loaded), config=loaded,
                    actor=default_actor("cli"))
    generation = client.publish_config()
    echo(f"published {path} as generation {generation} ({len(loaded.jobs)} jobs)")


@main.command("next")
@click.argument("job_or_expr", metavar="JOB_OR_EXPR")
@config_option
@click.option("--tz", "tz", default=None, metavar="ZONE",
              help="Time zone of a cron expression (default UTC).")
@click.option("-n", "count", type=click.IntRange(min=1), default=10, show_default=True,
              help="How many fires to show.")
@click.option("--after", default=None, metavar="ISO_TIME",
              help="Show fires strictly after this time (default: now; no zone means UTC).")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list.")
@friendly
def next_fires(job_or_expr: str, config: str | None, tz: str | None, count: int,
               after: str | None, as_json: bool) -> None:
    """Show the next fires of a job of the file, or of a cron expression, with DST notes."""
    from cronsvc.cli.next import find_spec, parse_after, render

    spec = find_spec(job_or_expr, config_path(config), tz)
    listing = render(spec, parse_after(after), count, as_json)
    if as_json:
        echo_json(listing)
    else:
        echo(listing)


# The operator commands: ls, pause, resume, trigger, at, cancel, history, queue, dead, status;
# and runtime schedules.
for _command in ops.COMMANDS:
    main.add_command(_command)
main.add_command(schedules.schedule)
main.add_command(web.web)
main.add_command(notify.notify)
main.add_command(imports.imports)
