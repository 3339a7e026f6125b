"""``cronsvc web``: the dashboard and the HTTP API."""

from __future__ import annotations

import click

from cronsvc.cli.options import config_option, friendly, log_format_option, redis_url_option


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
@log_format_option
@friendly
def web(config: str | None, redis_url: str | None, host: str, port: int,
        token_file: str | None, log_format: str) -> None:
    """Serve the dashboard and the HTTP API (/api/v1, docs on /api/docs)."""
    from cronsvc.cli.ops import connect_client
    from cronsvc.process.logs import setup_logging
    from cronsvc.web.server import serve
    from cronsvc.web.tokens import check_bind, load_tokens

    tokens = load_tokens(token_file)
    check_bind(host, tokens)  # before connecting: the refusal is the one line to see
    client = connect_client(config, redis_url)
    setup_logging(log_format, "web")
    serve(client, client.config, tokens, host, port)
