"""Open a checked Redis connection from a URL, and show URLs without their password."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit, urlunsplit

import redis

from .errors import RedisUnavailable


def mask_url(url: str) -> str:
    """``url`` with its password replaced by ``***`` (user names stay: they help debugging)."""
    try:
        parts = urlsplit(url)
        password = parts.password
    except ValueError:
        return url
    if not password:
        return url
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    netloc = f"{parts.username or ''}:***@{host}"
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


def connect(
    url: str, *, decode_responses: bool = True, timeout: float = 5.0, **kwargs: Any
) -> redis.Redis:
    """A client for ``url`` (redis://, rediss:// for TLS, unix://; user and password
    in the URL), checked with PING.

    Raises :class:`RedisUnavailable` naming the URL (password masked) and the reason.
    """
    shown = mask_url(url)
    try:
        client = redis.Redis.from_url(
            url, decode_responses=decode_responses, socket_connect_timeout=timeout,
            health_check_interval=30, **kwargs,
        )
    except ValueError as exc:
        raise RedisUnavailable(f"cannot reach Redis at {shown}: {_masked(exc, url)}") from exc
    try:
        client.ping()
    except redis.RedisError as exc:
        client.close()
        raise RedisUnavailable(f"cannot reach Redis at {shown}: {_masked(exc, url)}") from exc
    return client


def _masked(exc: Exception, url: str) -> str:
    reason = str(exc) or type(exc).__name__
    try:
        password = urlsplit(url).password
    except ValueError:
        password = None
    return reason.replace(password, "***") if password else reason
