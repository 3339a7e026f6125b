"""Who is asking, and may they: tokens, the session cookie, and CSRF.

Tokens come from the environment (``CRONSVC_WEB_TOKEN``: operator,
``CRONSVC_WEB_READ_TOKEN``: read-only) or a token file, one ``name role secret`` per
line (role ``read`` or ``operator``). Without any, the web serves on a loopback address
only, and everyone who reaches it is the local operator.

An API client sends ``Authorization: Bearer <secret>``. A browser signs in once; the
secret then rides in an HttpOnly, SameSite=Strict cookie, and every form post or page
call that changes something carries the CSRF token of the double-submit cookie.
"""

from __future__ import annotations

import hmac
import ipaddress
import os
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from cronsvc.errors import ConfigError

Role = Literal["read", "operator"]
ROLES: tuple[Role, ...] = ("read", "operator")
SESSION_COOKIE = "cronsvc_session"
CSRF_COOKIE = "cronsvc_csrf"
CSRF_HEADER = "x-csrf-token"
CSRF_FIELD = "csrf"
UNSAFE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})


@dataclass(frozen=True)
class Token:
    name: str
    role: Role
    secret: str


@dataclass(frozen=True)
class Identity:
    """Who a request acts as: written to the audit log as ``web:<name>``."""

    name: str
    role: Role
    via: Literal["bearer", "cookie", "local"]

    @property
    def operator(self) -> bool:
        return self.role == "operator"

    @property
    def actor(self) -> str:
        return f"web:{self.name}"


LOCAL = Identity("local", "operator", "local")


def load_tokens(token_file: str | None = None,
                environ: dict[str, str] | None = None) -> list[Token]:
    """The tokens of the environment and of ``token_file``; ConfigError naming the file and
    line of a bad one."""
    env = os.environ if environ is None else environ
    tokens: list[Token] = []
    if env.get("CRONSVC_WEB_TOKEN"):
        tokens.append(Token("operator", "operator", env["CRONSVC_WEB_TOKEN"]))
    if env.get("CRONSVC_WEB_READ_TOKEN"):
        tokens.append(Token("reader", "read", env["CRONSVC_WEB_READ_TOKEN"]))
    if token_file:
        tokens += _read_token_file(Path(token_file))
    names = [t.name for t in tokens]
    for name in names:
        if names.count(name) > 1:
            raise ConfigError([f"web tokens: the name {name!r} is given twice"])
    return tokens


def _read_token_file(path: Path) -> list[Token]:
    try:
        lines = path.read_text().splitlines()
    except OSError as exc:
        raise ConfigError([f"{path}: cannot read the token file: {exc.strerror}"]) from None
    tokens = []
    for n, line in enumerate(lines, 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        parts = line.split()
        if len(parts) != 3 or parts[1] not in ROLES:
            raise ConfigError([f"{path}:{n}: expected 'name role secret' with role read or "
                               "operator"])
        name, role, secret = parts
        if len(secret) < 16:
            raise ConfigError([f"{path}:{n}: the secret of {name!r} is shorter than 16 "
                               "characters"])
        tokens.append(Token(name, role, secret))  # type: ignore[arg-type]
    return tokens


def is_loopback(host: str) -> bool:
    if host in ("localhost", ""):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a host name: it may resolve anywhere


def check_bind(host: str, tokens: list[Token]) -> None:
    """Refuse to serve beyond this machine with nobody to ask for a token."""
    if not tokens and not is_loopback(host):
        raise ConfigError([f"refusing to serve the web on {host} without a token: set "
                           "CRONSVC_WEB_TOKEN (or pass --token-file), or serve on 127.0.0.1"])


class Guard:
    """Decides who a request is, from the tokens the server was started with."""

    def __init__(self, tokens: list[Token]) -> None:
        self.tokens = tokens

    @property
    def open(self) -> bool:
        """No tokens: a loopback server where everyone is the local operator."""
        return not self.tokens

    def find(self, secret: str | None) -> Token | None:
        if not secret:
            return None
        found = None
        for t in self.tokens:  # compare with every token: no early exit to time
            if hmac.compare_digest(t.secret.encode(), secret.encode()):
                found = t
        return found

    def identify(self, authorization: str | None, session: str | None) -> Identity | None:
        """The identity of a request, or None (sign in first)."""
        if authorization and authorization.lower().startswith("bearer "):
            token = self.find(authorization[7:].strip())
            return Identity(token.name, token.role, "bearer") if token else None
        if self.open:
            return LOCAL
        token = self.find(session)
        return Identity(token.name, token.role, "cookie") if token else None


def new_csrf() -> str:
    return secrets.token_urlsafe(24)


def csrf_ok(identity: Identity, cookie: str | None, sent: str | None,
            origin: str | None, fetch_site: str | None, host: str | None) -> bool:
    """Whether a request that changes something may: a bearer token needs no CSRF token;
    a browser (a cookie, or an Origin or Sec-Fetch-Site header) must send the CSRF cookie's
    value back, and never from another site."""
    if identity.via == "bearer":
        return True
    if fetch_site == "cross-site":
        return False
    if origin and host and origin.split("://", 1)[-1] != host:
        return False
    browser = identity.via == "cookie" or origin is not None or fetch_site is not None
    if not browser:
        return True  # curl or a script on this machine, against an open loopback server
    return bool(cookie and sent and hmac.compare_digest(cookie, sent))
