"""How a web server is run: the names it answers to, the proxies it trusts, the largest
body it reads, how long a browser session lives, and where it keeps its state."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cronsvc import sizes
from cronsvc.process.up import STATE_DIR

#: Far above any body the API takes (a payload is at most 64 KiB), far below what would
#: hurt: a body is refused past this before it is read.
MAX_BODY = 1024 * 1024
#: A browser signs in again after a working day.
SESSION_TTL = 12 * 3600.0


@dataclass(frozen=True)
class WebSettings:
    allowed_hosts: tuple[str, ...] = ()
    trusted_proxies: tuple[str, ...] = ()
    max_body: int = MAX_BODY
    session_ttl: float = SESSION_TTL
    state_dir: Path = STATE_DIR  # beside the Redis of `cronsvc up`: the session key


def parse_size(text: str) -> int:
    """Bytes of ``512KiB``, ``1MiB``, ``2M`` or ``65536``; ValueError if it is none, or
    less than 1 KiB (a sign-in form would not fit)."""
    try:
        size = sizes.parse_size(text)
    except ValueError:
        raise ValueError(f"{text!r}: expected bytes, or a size such as 512KiB or 1MiB") from None
    if size < 1024:
        raise ValueError(f"{text!r}: at least 1KiB")
    return size


def parse_proxy(text: str) -> str:
    """An address or network (``10.0.0.0/8``) of a proxy whose X-Forwarded-Proto is
    believed; ValueError otherwise."""
    try:
        return str(ipaddress.ip_network(text.strip(), strict=False))
    except ValueError:
        raise ValueError(f"{text!r}: expected an IP address or network such as "
                         "10.0.0.0/8") from None
