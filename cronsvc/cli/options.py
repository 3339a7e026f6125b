"""Options and error handling shared by every ``cronsvc`` command."""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable
from typing import Any, TypeVar

import click

from cronsvc.cli.term import echo
from cronsvc.errors import ConfigError, CronsvcError, RedisUnavailable

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
                echo(line, err=True)
            sys.exit(1)
        except RedisUnavailable as exc:
            echo(str(exc), err=True)
            sys.exit(2)
        except CronsvcError as exc:
            echo(str(exc), err=True)
            sys.exit(1)

    return wrapper  # type: ignore[return-value]


config_option = click.option(
    "--config", "config", default=None, metavar="FILE",
    help="Job file (default: $CRONSVC_CONFIG, then ./schedules.yaml).",
)


class Duration(click.ParamType):
    """A duration as the job file writes it: 30s, 5m, 2h, 1d, 1h30m or seconds."""

    name = "duration"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        from cronsvc.durations import parse_duration

        try:
            return value if isinstance(value, float) else parse_duration(value)
        except ValueError as exc:
            self.fail(f"{value!r}: {exc}", param, ctx)


DURATION = Duration()
redis_url_option = click.option(
    "--redis-url", "redis_url", default=None, metavar="URL",
    help="Redis to use (default: $CRONSVC_REDIS_URL, then redis.url in the job file).",
)
log_format_option = click.option(
    "--log-format", type=click.Choice(["human", "json"]), default="human", show_default=True,
    help="Readable lines, or JSON lines for log shippers.",
)
name_option = click.option("--name", default=None, hidden=True,
                           help="Id of the process (the part before @ starts its log lines).")


def require_redis_url(option: str | None, config: Any) -> str:
    """The Redis URL to use; RedisUnavailable (exit 2) saying how to set one if none is."""
    from cronsvc.process.redis_url import find_redis_url

    url = find_redis_url(option, config.redis.url)
    if not url:
        raise RedisUnavailable(
            "no Redis URL: pass --redis-url, set CRONSVC_REDIS_URL or redis.url in "
            f"{config.source} (or run `cronsvc up` for an embedded server)"
        )
    return url
METRICS_HOST = "127.0.0.1"  # loopback: metrics name jobs and hosts; open them on purpose


def _keep_metrics_host(ctx: click.Context, _: click.Parameter, value: str) -> str:
    ctx.meta["cronsvc.metrics_host"] = value
    return value


_metrics_port = click.option(
    "--metrics-port", "metrics_port", type=click.IntRange(0, 65535), default=None,
    metavar="PORT", help="Serve Prometheus metrics on this port (0: any free port, logged).",
)
# Read with metrics_host(), not passed: an environment variable, so that the children
# of `cronsvc up` inherit it.
_metrics_host = click.option(
    "--metrics-host", envvar="CRONSVC_METRICS_HOST", default=METRICS_HOST, show_default=True,
    metavar="ADDR", expose_value=False, callback=_keep_metrics_host,
    help="Address the metrics listen on (0.0.0.0: every interface, for a scraper on "
         "another host); also $CRONSVC_METRICS_HOST.")


def metrics_port_option(fn: F) -> F:
    """--metrics-port, and --metrics-host (see :func:`metrics_host`)."""
    return _metrics_port(_metrics_host(fn))


def metrics_host() -> str:
    """--metrics-host of the command running."""
    return str(click.get_current_context().meta.get("cronsvc.metrics_host", METRICS_HOST))
