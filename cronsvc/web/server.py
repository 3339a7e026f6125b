"""Serving the web app with uvicorn: the command ``cronsvc web`` and ``cronsvc up``."""

from __future__ import annotations

import errno
import logging
import socket

import uvicorn

from cronsvc.client.client import Client
from cronsvc.config.jobfile import JobFile
from cronsvc.errors import ConfigError
from cronsvc.web.app import create_app
from cronsvc.web.hosts import AllowedHosts
from cronsvc.web.settings import WebSettings
from cronsvc.web.tokens import Token, check_bind

log = logging.getLogger("cronsvc.web")


def serve(client: Client, job_file: JobFile | None, tokens: list[Token], host: str,
          port: int, settings: WebSettings) -> None:
    """Serve until SIGTERM or SIGINT. ConfigError before anything listens when ``host`` is
    not loopback and there is no token, or when it cannot listen."""
    check_bind(host, tokens)
    sock = listen(host, port)
    bound = sock.getsockname()[1]  # port 0: the one the system chose, which Host names
    if job_file is not None:  # jobs added to the file show their definitions too
        job_file.watch(job_file.reread)
    app = create_app(client, tokens, job_file, AllowedHosts(host, bound, settings.allowed_hosts),
                     settings)
    # proxy_headers off: uvicorn would believe X-Forwarded-* from 127.0.0.1 by default;
    # the gate believes only --trusted-proxy (cronsvc.web.middleware).
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False,
                                           lifespan="off", proxy_headers=False))
    shown = f"[{host}]" if ":" in host else host
    log.info("dashboard on http://%s:%d/ (API docs on /api/docs)", shown, bound)
    server.run(sockets=[sock])


def listen(host: str, port: int, choose: str = "--port PORT") -> socket.socket:
    """A listening socket on ``host``:``port`` (an IPv6 address has a colon). A port in
    use is said as such, with ``choose``: how to choose another."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        sock = socket.create_server((host.strip("[]"), port), family=family, backlog=2048)
    except OSError as exc:
        why = (f"port {port} is taken (another program listens on it); choose another with "
               f"{choose}" if exc.errno == errno.EADDRINUSE
               else exc.strerror or str(exc))
        raise ConfigError([f"cannot serve the web on {host}:{port}: {why}"]) from None
    # Replies go out at once, each connection inheriting it: asyncio sets TCP_NODELAY only
    # on sockets made with proto IPPROTO_TCP, which create_server's are not, and a reply
    # written as headers then body would wait ~40 ms for the client's delayed ACK on
    # every request of a kept-alive connection.
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock
