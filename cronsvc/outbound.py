"""What cronsvc sends to the outside (webhooks, Slack and Teams, pings, SMTP servers, an
``http`` job's request): how each URL must look, checked when the job file is read and
again, with every ``${VAR}`` filled in (:mod:`cronsvc.secrets`), when sending; and the
one way of speaking HTTP to the outside, so that the notifier and the ``http`` kind of
job follow the same rules (certificates checked, no redirect followed, no credential in
clear). No message here repeats a URL with its variables filled in.

In the shared vocabulary, below the job file's models and the kinds, because both check
the URLs they are given; the web asks :func:`is_loopback` too, of the address it serves.
"""

from __future__ import annotations

import ipaddress
import os
import ssl
import threading
from collections.abc import Mapping
from typing import Any
from urllib.parse import urljoin, urlsplit

from pydantic_core import PydanticCustomError

from cronsvc.secrets import VAR

HTTP = ("http", "https")
SMTP = ("smtp", "smtps")
#: The pydantic error type of a check whose message must not quote the value (a URL that
#: may hold a secret): raise ``PydanticCustomError(UNQUOTED, message)``.
UNQUOTED = "unquoted"
#: Headers whose value is a credential: never sent in clear beyond this machine.
CREDENTIAL_HEADERS = frozenset({"authorization", "proxy-authorization"})


def url_problem(url: str, schemes: tuple[str, ...]) -> str | None:
    """Why ``url`` is not a URL of one of ``schemes`` with a host, or None. The message
    never repeats the URL: it may hold a secret (a Slack webhook's path is one)."""
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError for a port that is not one
    except ValueError:
        return "not a URL (a port that is not a number, or an unclosed '[')"
    if parts.scheme not in schemes:
        return "expected a URL starting " + " or ".join(f"{s}://" for s in schemes)
    if not parts.hostname:
        return f"no host after {parts.scheme}://"
    return None


def written_url_problem(text: str, schemes: tuple[str, ...]) -> str | None:
    """:func:`url_problem` of a URL as the job file writes it, where a ``${VAR}`` stands
    for text known only when sending: one at the start hides the scheme, so the check is
    left to then; elsewhere it counts as some text, ``0``, that a host or port may be."""
    if text.startswith("${"):
        return None
    return url_problem(VAR.sub("0", text), schemes)


def check_written_url(value: str | None, schemes: tuple[str, ...]) -> None:
    """A validator's error, which does not quote ``value``, unless it is a URL of
    ``schemes`` as far as can be told before ``${VAR}`` is filled in."""
    problem = None if value is None else written_url_problem(value, schemes)
    if problem:
        raise PydanticCustomError(UNQUOTED, problem)


def shown(url: str) -> str:
    """A URL as a message may show it: scheme and host, nothing that may be secret."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:  # an open '[' or a port out of range (a redirect's Location may be)
        return "an invalid URL"
    return f"{parts.scheme}://{parts.hostname or '?'}" + (f":{port}" if port else "")


def redirect_target(url: str, location: str) -> str:
    """Where a redirect from ``url`` points, shown as :func:`shown` shows a URL: the path
    or query of the target may hold a token as much as the URL asked."""
    try:
        return shown(urljoin(url, location))
    except ValueError:  # the other side's text: an unclosed '[' does not join
        return "an invalid URL"


def is_loopback(host: str) -> bool:
    """True for a host that is this machine by its address (or ``localhost``)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a host name: it may resolve anywhere


def clear_credentials_problem(url: str, headers: Mapping[str, str]) -> str | None:
    """Why ``url`` with ``headers`` would send a credential (a user and password in the
    URL, an Authorization header) unencrypted beyond this machine, or None: ``http://``
    only to a loopback host then. A ``${VAR}`` host counts as a remote one."""
    try:
        parts = urlsplit(VAR.sub("0", url))
    except ValueError:
        return None  # url_problem tells
    if parts.scheme != "http" or is_loopback(parts.hostname or ""):
        return None
    if parts.username is not None or parts.password is not None:
        what = "a user and password in the URL"
    elif CREDENTIAL_HEADERS & {name.lower() for name in headers}:
        what = "an Authorization header"
    else:
        return None
    return f"{what} would travel unencrypted: use https:// (http:// only to a loopback host)"


def client_settings(timeout: float) -> dict[str, Any]:
    """The settings of every HTTP client that talks to the outside (``httpx.Client`` and
    ``httpx.AsyncClient`` take the same): certificates are checked against the system's
    trust store, as for mail (httpx's default is certifi's bundle, which knows no company
    CA), and no redirect is followed: it would take the request's headers (a signature,
    a token) wherever it points, turn a POST into a GET without its body, and a 3xx would
    count as taken."""
    return {"verify": trust_store_context("http"), "follow_redirects": False,
            "timeout": timeout}


_contexts: dict[tuple[str, str | None, str | None], ssl.SSLContext] = {}
_contexts_lock = threading.Lock()


def trust_store_context(use: str) -> ssl.SSLContext:
    """A client context that checks certificates and host names against the system's trust
    store (``SSL_CERT_FILE`` and ``SSL_CERT_DIR`` name others), made once per ``use`` and
    trust store in a process: loading the store costs some 25 ms of CPU, more than all
    else an ``http`` fire does. The uses get contexts of their own (``"http"``, whose
    client sets ALPN on it, and ``"smtp"``); they are not changed after."""
    key = (use, os.environ.get("SSL_CERT_FILE"), os.environ.get("SSL_CERT_DIR"))
    context = _contexts.get(key)
    if context is None:
        with _contexts_lock:
            context = _contexts.get(key)
            if context is None:
                context = _contexts[key] = ssl.create_default_context()
    return context


def first_line(value: object) -> str:
    """The first line of an error's text, at most 200 characters: one line to report."""
    text = str(value).strip()
    return text.splitlines()[0][:200] if text else ""
