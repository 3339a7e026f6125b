"""``cronsvc import``: a job file from Celery beat, a crontab or Kubernetes CronJobs.

The job file goes to stdout (or ``-o FILE``); stderr gets each job's next three fires,
as cronsvc computes them (to compare with the old scheduler before switching), then every
note, located. An entry it cannot map is refused: nothing is written and the exit code is
1, unless ``--skip-unmappable`` writes the rest.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import click

from cronsvc.cli.options import friendly
from cronsvc.cli.term import echo

if TYPE_CHECKING:
    from cronsvc.importers.imported import Imported

F = TypeVar("F", bound=Callable[..., Any])


@click.group("import")
def imports() -> None:
    """Write a job file from another scheduler's definitions."""


def _common(fn: F) -> F:
    fn = click.option("--skip-unmappable", is_flag=True,
                      help="Write the entries that map and leave out the others (still "
                           "named on stderr), exit 0.")(fn)
    return click.option("-o", "--output", type=click.Path(dir_okay=False, writable=True),
                        default=None, metavar="FILE",
                        help="Write the job file here (default: stdout).")(fn)


@imports.command("celery")
@click.option("--app", "app_ref", required=True, metavar="MODULE:APP",
              help="The Celery app, as `celery -A` takes it (proj.celery:app).")
@_common
@friendly
def celery(app_ref: str, output: str | None, skip_unmappable: bool) -> None:
    """The entries of a Celery app's beat_schedule, as jobs of kind celery.

    Imports the app's module (your code, as `celery beat` would); needs no broker.
    """
    from cronsvc.importers.beat import beat_jobs, load_app

    app, ref = load_app(app_ref)
    _finish(beat_jobs(app, ref), output, skip_unmappable)


@imports.command("crontab")
@click.argument("file", type=click.Path(exists=True, dir_okay=False))
@click.option("--system/--user", "system", default=None,
              help="Whether lines have a user column (default: yes for /etc/crontab and "
                   "cron.d files).")
@click.option("--timezone", default=None, metavar="ZONE",
              help="The zone cron ran in, for lines before any CRON_TZ= (default UTC).")
@_common
@friendly
def crontab(file: str, system: bool | None, timezone: str | None, output: str | None,
            skip_unmappable: bool) -> None:
    """The lines of a crontab, as shell command jobs."""
    from cronsvc.importers.crontab import crontab_jobs

    if timezone is not None:
        _zone(timezone)
    _finish(crontab_jobs(_read(file), file, system=system, timezone=timezone), output,
            skip_unmappable)


@imports.command("cronjob")
@click.argument("file", type=click.Path(exists=True, dir_okay=False))
@_common
@friendly
def cronjob(file: str, output: str | None, skip_unmappable: bool) -> None:
    """Kubernetes CronJob manifests (several documents in one file), as command jobs."""
    from cronsvc.importers.cronjob import cronjob_jobs

    _finish(cronjob_jobs(_read(file), file), output, skip_unmappable)


def _zone(name: str) -> None:
    from cronsvc.schedule.expand import zone

    zone(name)  # ScheduleError, one line through friendly


def _read(path: str) -> str:
    from cronsvc.config.models import read_job_file

    return read_job_file(path)  # bounded, and errors are one located line


def _finish(result: Imported, output: str | None, skip: bool) -> None:
    """Print the fires and the notes; write the file unless something was refused."""
    document = _ordered(result.document)
    _fires(document)
    for note in result.notes:
        echo(str(note), err=True)
    refused = len(result.refused)
    if refused and not skip:
        echo(f"nothing written: {refused} entr{'y' if refused == 1 else 'ies'} refused; "
             "fix them, or pass --skip-unmappable to write the rest", err=True)
        sys.exit(1)
    text = _yaml(document)
    if output is None:
        echo(text.rstrip("\n"))
        return
    with open(output, "w", encoding="utf-8") as f:
        f.write(text)
    left = f", {refused} left out" if refused else ""
    echo(f"wrote {len(result.jobs)} jobs to {output}{left}; check it: cronsvc validate "
         f"{output}", err=True)


def _ordered(document: dict[str, Any]) -> dict[str, Any]:
    from cronsvc.config.models import TOP_KEYS

    return {key: document[key] for key in TOP_KEYS if key in document}


def _fires(document: dict[str, Any]) -> None:
    """Each job's next 3 fires, as ``cronsvc next`` shows them."""
    from cronsvc.cli.next import render
    from cronsvc.clock import now_dt
    from cronsvc.durations import parse_duration
    from cronsvc.schedule.expand import Spec

    now = now_dt()
    defaults = document.get("defaults", {})
    for name, raw in document["jobs"].items():
        job = {**defaults, **raw}
        every = job.get("every")
        spec = Spec(cron=job.get("cron"), timezone=job.get("timezone", "UTC"), name=name,
                    every_ms=None if every is None else round(parse_duration(every) * 1000))
        echo(render(spec, now, 3, False), err=True)


def _yaml(document: dict[str, Any]) -> str:
    """The document as the docs write a job file: mappings in blocks but a ``Flow`` one,
    lists of plain values on one line, cron expressions in double quotes."""
    import yaml

    from cronsvc.importers.imported import Flow, Quoted

    class Dumper(yaml.SafeDumper):
        pass

    def block(dumper: yaml.SafeDumper, data: dict[str, Any]) -> yaml.Node:
        return dumper.represent_mapping("tag:yaml.org,2002:map", data, flow_style=False)

    def flow(dumper: yaml.SafeDumper, data: dict[str, Any]) -> yaml.Node:
        return dumper.represent_mapping("tag:yaml.org,2002:map", data, flow_style=True)

    def items(dumper: yaml.SafeDumper, data: list[Any]) -> yaml.Node:
        plain = all(not isinstance(item, dict | list) for item in data)
        return dumper.represent_sequence("tag:yaml.org,2002:seq", data, flow_style=plain)

    def quoted(dumper: yaml.SafeDumper, data: str) -> yaml.Node:
        return dumper.represent_scalar("tag:yaml.org,2002:str", str(data), style='"')

    Dumper.add_representer(dict, block)
    Dumper.add_representer(Flow, flow)
    Dumper.add_representer(list, items)
    Dumper.add_representer(Quoted, quoted)
    return yaml.dump(document, Dumper=Dumper, sort_keys=False, width=1000)
