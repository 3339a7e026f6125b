"""``cronsvc web``: the dashboard and the HTTP API; and the web options ``cronsvc up``
passes on to it."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import click

from cronsvc.cli.ops import Checked
from cronsvc.cli.options import (
    DURATION,
    config_option,
    friendly,
    log_format_option,
    redis_url_option,
)
from cronsvc.web.hosts import split_host
from cronsvc.web.settings import MAX_BODY, SESSION_TTL, WebSettings, parse_proxy, parse_size

if TYPE_CHECKING:  # read when the command runs: `cronsvc --help` stays quick
    from cronsvc.config.jobfile import JobFile
    from cronsvc.config.models import Config

F = TypeVar("F", bound=Callable[..., Any])


def _host_name(value: str) -> str:
    split_host(value)  # ValueError saying what is wrong
    return value


allowed_host_option = click.option(
    "--allowed-host", "allowed_hosts", multiple=True, type=Checked("host", _host_name),
    metavar="NAME[:PORT]",
    help="A name the web is reached by, besides its loopback names (repeatable; without "
         "a port, on any port). Requests for other names are refused (DNS rebinding).")
trusted_proxy_option = click.option(
    "--trusted-proxy", "trusted_proxies", multiple=True, type=Checked("ip", parse_proxy),
    metavar="IP[/BITS]",
    help="A reverse proxy whose X-Forwarded-Proto is believed (repeatable): over HTTPS, "
         "cookies are sent Secure.")


def web_options(fn: F) -> F:
    """The options ``cronsvc web`` and ``cronsvc up`` share."""
    return allowed_host_option(trusted_proxy_option(fn))


def passed_on(allowed_hosts: tuple[str, ...], trusted_proxies: tuple[str, ...]) -> list[str]:
    """:func:`web_options` as ``cronsvc up`` hands them to its ``cronsvc web``."""
    return [*(a for h in allowed_hosts for a in ("--allowed-host", h)),
            *(a for p in trusted_proxies for a in ("--trusted-proxy", p))]


@click.command()
@config_option
@redis_url_option
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address to listen on; beyond loopback a token is required.")
@click.option("--port", type=click.IntRange(0, 65535), default=8080, show_default=True,
              help="Port to listen on.")
@click.option("--token-file", default=None, metavar="FILE",
              help="Tokens, one 'name role secret' per line (role read or operator); "
                   "also $CRONSVC_WEB_TOKEN (operator) and $CRONSVC_WEB_READ_TOKEN.")
@web_options
@click.option("--max-body", type=Checked("size", parse_size), default=str(MAX_BODY),
              show_default="1MiB", metavar="SIZE",
              help="Largest request body; a larger one is refused before it is read.")
@click.option("--session-ttl", type=DURATION, default=SESSION_TTL, show_default="12h",
              help="How long a browser stays signed in.")
@log_format_option
@friendly
def web(config: str | None, redis_url: str | None, host: str, port: int,
        token_file: str | None, allowed_hosts: tuple[str, ...],
        trusted_proxies: tuple[str, ...], max_body: int, session_ttl: float,
        log_format: str) -> None:
    """Serve the dashboard and the HTTP API (/api/v1, docs on /api/docs)."""
    from cronsvc.cli.ops import connect_client
    from cronsvc.process.logs import setup_logging
    from cronsvc.web.server import serve
    from cronsvc.web.tokens import check_bind, load_tokens

    if session_ttl < 1:
        raise click.BadParameter("at least 1s", param_hint="--session-ttl")
    tokens = load_tokens(token_file)
    check_bind(host, tokens)  # before connecting: the refusal is the one line to see
    client = connect_client(config, redis_url)
    setup_logging(log_format, "web")
    serve(client, web_job_file(client.config), tokens, host, port,
          WebSettings(allowed_hosts, trusted_proxies, max_body, session_ttl))


def web_job_file(loaded: Config | None) -> JobFile | None:
    """The web server's job file, started from what the CLI read of it (a broken file: its
    redis: section, and the state 'rejected'); None without a file."""
    from cronsvc.config.jobfile import JobFile

    if loaded is None or loaded.source is None or not os.path.exists(loaded.source):
        return None
    job_file = JobFile(loaded.source, config=loaded)
    job_file.reload(force=True)  # a broken file is known as such from the start
    return job_file
