"""The names the web answers to.

A page of another site can make its own name resolve to this server's address (DNS
rebinding): its requests then reach the server, but carry that site's name in ``Host``
and ``Origin``. So every request's ``Host`` must be a name of this server, and a
browser's change must come from a page whose ``Origin`` is one: the server's loopback
names (``localhost``, ``127.0.0.1``, ``[::1]`` on its port) when it listens there, the
address it is bound to, and the names it is told with ``--allowed-host``.
"""

from __future__ import annotations

import ipaddress
from urllib.parse import urlsplit

from cronsvc.outbound import is_loopback

#: Binds that listen on every address: they know no name of their own but loopback's.
WILDCARDS = ("0.0.0.0", "::", "[::]", "")
LOOPBACK_NAMES = ("localhost", "127.0.0.1", "[::1]")
DEFAULT_PORTS = {"http": 80, "https": 443}


def split_host(value: str) -> tuple[str, int | None]:
    """``name``, ``name:port``, ``[v6]`` or ``[v6]:port`` as (name, port or None), the name
    in one spelling (lower case, no final dot, IPv6 compressed in brackets); ValueError
    for anything else."""
    text = value.strip().lower()
    port: int | None = None
    if "://" in text:
        raise ValueError(f"{value!r}: give the host name (and :port), not a URL")
    if text.startswith("["):
        name, _, rest = text[1:].partition("]")
        try:
            name = f"[{ipaddress.IPv6Address(name).compressed}]"
        except ValueError:
            raise ValueError(f"{value!r}: not an IPv6 address in brackets") from None
        if rest and not rest.startswith(":"):
            raise ValueError(f"{value!r}: expected [address]:port")
        return name, _port(value, rest[1:]) if rest else None
    name, sep, rest = text.partition(":")
    if sep:
        port = _port(value, rest)
    name = name.rstrip(".")
    if not name or any(c in name for c in "/@?#*\\ "):
        raise ValueError(f"{value!r}: expected a host name or address, with :port or not")
    return name, port


def _port(value: str, text: str) -> int:
    if not text.isdigit() or not 0 < int(text) < 65536:
        raise ValueError(f"{value!r}: the port must be 1 to 65535")
    return int(text)


class AllowedHosts:
    """The Host and Origin values a server bound to ``bind``:``port`` accepts: the names
    of ``extra`` (``name`` on any port, ``name:port`` on that one) besides its own."""

    def __init__(self, bind: str, port: int, extra: tuple[str, ...] = ()) -> None:
        self.bind = bind
        self.port = port
        self.wildcard = bind in WILDCARDS
        self.exact: set[tuple[str, int]] = set()
        self.any_port: set[str] = set()
        if self.wildcard or is_loopback(bind):
            self.exact |= {(name, port) for name in LOOPBACK_NAMES}
        if not self.wildcard:
            own = f"[{bind.strip('[]')}]" if ":" in bind else bind
            self.exact.add((split_host(own)[0], port))
        for value in extra:
            name, given = split_host(value)
            if given is None:
                self.any_port.add(name)
            else:
                self.exact.add((name, given))

    def allows(self, host: str | None, scheme: str = "http") -> bool:
        """Whether a request's ``Host`` header names this server (no port: the
        scheme's)."""
        if not host:
            return False
        try:
            name, port = split_host(host)
        except ValueError:
            return False
        return name in self.any_port or (name, port or DEFAULT_PORTS.get(scheme, 80)) \
            in self.exact

    def allows_origin(self, origin: str) -> bool:
        """Whether a browser's ``Origin`` (``scheme://host[:port]``) is a page of this
        server; ``null`` (a sandboxed or opaque page) never is."""
        parts = urlsplit(origin)
        if parts.scheme not in DEFAULT_PORTS or not parts.netloc:
            return False
        return self.allows(parts.netloc, parts.scheme)

    def refusal(self, host: str | None) -> str:
        """Why a request for ``host`` is refused, and how to serve under that name."""
        told = ("a server bound to every address knows no public name of its own: tell it "
                "each one" if self.wildcard else "to serve under another name, start it")
        return (f"Host {host or '(none)'!r} is not a name of this server: {told} with "
                "--allowed-host NAME (repeatable)")
