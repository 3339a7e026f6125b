"""The ``cronsvc`` command: a thin click group over the library.

Each command is a few lines calling into the package. Errors derived from
:class:`CronsvcError` become one line on stderr and a non-zero exit, never a
traceback.
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable
from typing import Any, TypeVar

import click

from . import __version__
from .errors import ConfigError, CronsvcError, RedisUnavailable

F = TypeVar("F", bound=Callable[..., Any])

DEFAULT_CONFIG = "schedules.yaml"


def config_path(value: str | None) -> str:
    """--config, then CRONSVC_CONFIG, then ./schedules.yaml."""
    return value or os.environ.get("CRONSVC_CONFIG") or DEFAULT_CONFIG


def friendly(fn: F) -> F:
    """Turn library errors into one plain message and an exit code."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except ConfigError as exc:
            for line in exc.problems:
                click.echo(line, err=True)
            sys.exit(1)
        except RedisUnavailable as exc:
            click.echo(str(exc), err=True)
            sys.exit(2)
        except CronsvcError as exc:
            click.echo(str(exc), err=True)
            sys.exit(1)

    return wrapper  # type: ignore[return-value]


config_option = click.option(
    "--config", "config", default=None, metavar="FILE",
    help="Job file (default: $CRONSVC_CONFIG, then ./schedules.yaml).",
)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="cronsvc")
def main() -> None:
    """Distributed cron on Redis."""


# Commands are added below, one small function each.


@main.command()
@click.argument("file", required=False, metavar="[FILE]")
@config_option
@friendly
def validate(file: str | None, config: str | None) -> None:
    """Check a job file and list every problem in it (exit 1 if there is one)."""
    from .config import load_config

    path = file or config_path(config)
    loaded = load_config(path)
    count = len(loaded.jobs)
    click.echo(f"{path}: {count} job{'' if count == 1 else 's'} OK")


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
    from .preview import find_spec, parse_after, render

    spec = find_spec(job_or_expr, config_path(config), tz)
    click.echo(render(spec, parse_after(after), count, as_json))
