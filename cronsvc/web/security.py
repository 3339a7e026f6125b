"""Who is asking, and may they: tokens, the session cookie, and CSRF.

An API client sends ``Authorization: Bearer <secret>``. A browser signs in once (the
form carries a CSRF token too) and then holds a signed session cookie (HttpOnly,
SameSite=Strict, Secure over HTTPS: :mod:`cronsvc.web.sessions`); every form post or
page call that changes something sends back the CSRF token of the double-submit cookie,
from a page of this server (:mod:`cronsvc.web.hosts`). Where tokens come from:
:mod:`cronsvc.web.tokens`.
"""

from __future__ import annotations

import hmac
import secrets
from dataclasses import dataclass
from typing import Literal

from cronsvc.web.hosts import AllowedHosts
from cronsvc.web.sessions import Sessions
from cronsvc.web.tokens import Role, Token

SESSION_COOKIE = "cronsvc_session"
CSRF_COOKIE = "cronsvc_csrf"
CSRF_HEADER = "x-csrf-token"
CSRF_FIELD = "csrf"
UNSAFE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})


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


class Guard:
    """Decides who a request is, from the tokens the server was started with and the
    sessions signed in with them. No sessions (no tokens): a loopback server where
    everyone is the local operator."""

    def __init__(self, tokens: list[Token], sessions: Sessions | None) -> None:
        self.tokens = tokens
        self.sessions = sessions

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
        if self.sessions is None:
            return LOCAL
        token = self.sessions.find(session, self.tokens)
        return Identity(token.name, token.role, "cookie") if token else None


def new_csrf() -> str:
    return secrets.token_urlsafe(24)


def csrf_ok(identity: Identity | None, cookie: str | None, sent: str | None,
            origin: str | None, fetch_site: str | None, hosts: AllowedHosts) -> bool:
    """Whether a request that changes something may: a bearer token needs no CSRF token;
    a browser (a cookie, an Origin or Sec-Fetch-Site header, or one signing in, who is
    nobody yet) must send the CSRF cookie's value back, from a page of this server."""
    if identity is not None and identity.via == "bearer":
        return True
    if fetch_site == "cross-site":
        return False
    if origin is not None and not hosts.allows_origin(origin):
        return False
    browser = identity is None or identity.via == "cookie" or origin is not None or \
        fetch_site is not None
    if not browser:
        return True  # curl or a script on this machine, against an open loopback server
    return bool(cookie and sent and hmac.compare_digest(cookie, sent))
