"""Serving the web app with uvicorn: the command ``cronsvc web`` and ``cronsvc up``."""

from __future__ import annotations

import logging

import uvicorn

from cronsvc.client.client import Client
from cronsvc.config.models import Config
from cronsvc.web.app import create_app
from cronsvc.web.tokens import Token, check_bind

log = logging.getLogger("cronsvc.web")


def serve(client: Client, config: Config | None, tokens: list[Token], host: str,
          port: int) -> None:
    """Serve until SIGTERM or SIGINT. ConfigError before anything listens when ``host`` is
    not loopback and there is no token."""
    check_bind(host, tokens)
    app = create_app(client, tokens, config)
    server = uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level="warning",
                                           access_log=False, lifespan="off"))
    shown = f"[{host}]" if ":" in host else host
    log.info("dashboard on http://%s:%d/ (API docs on /api/docs)", shown, port)
    server.run()
