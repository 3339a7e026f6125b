"""Secrets in what cronsvc connects and sends to: ``${VAR}`` in the job file (a webhook's
URL, a broker's, a request's headers), read from the process's environment when it is
used, so a secret never lands in the file's published definition, in Redis or in a
log; and URLs shown with their passwords masked."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit, urlunsplit

from cronsvc.errors import CronsvcError

#: Query options of a Redis URL whose value is a secret.
SECRET_OPTIONS = ("ssl_password", "sentinel_password", "password")
#: ``${VAR}``: text read from the environment when sending.
VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


class MissingVariable(CronsvcError):
    """A ``${VAR}`` whose variable this process's environment lacks."""


def expand(text: str, where: str, environ: Mapping[str, str] | None = None) -> str:
    """``text`` with each ``${VAR}`` replaced from the environment; MissingVariable,
    naming ``where`` and the variable (never a value), if one is not set."""
    env = os.environ if environ is None else environ

    def value(m: re.Match[str]) -> str:
        name = m.group(1)
        if name not in env:
            raise MissingVariable(f"{where}: environment variable {name} is not set")
        return env[name]

    return VAR.sub(value, text)


def netloc_parts(netloc: str) -> tuple[str, str | None, str]:
    """(user, password or None, hosts) of a netloc that may list several hosts."""
    userinfo, at, hosts = netloc.rpartition("@")
    if not at:
        return "", None, netloc
    user, colon, password = userinfo.partition(":")
    return user, (password if colon else None), hosts


def mask_url(url: str) -> str:
    """``url`` with its passwords (and ``*_password`` query values) shown as ``***``.

    User names stay: they help debugging.
    """
    try:
        parts = urlsplit(url)
    except ValueError:
        return url
    user, password, hosts = netloc_parts(parts.netloc)
    netloc = f"{user}:***@{hosts}" if password else parts.netloc
    query = parts.query
    if query:
        pairs = parse_qsl(query, keep_blank_values=True)
        if any(k in SECRET_OPTIONS and v for k, v in pairs):
            query = urlencode([(k, "***" if k in SECRET_OPTIONS and v else v) for k, v in pairs],
                              safe="*/:")
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def secrets_in(url: str) -> list[str]:
    """The secrets written in ``url``: its password, plain and unquoted, and its
    ``*_password`` options."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return []
    _, password, _ = netloc_parts(parts.netloc)
    found = [password, unquote(password)] if password else []
    found += [v for k, v in parse_qsl(parts.query) if k in SECRET_OPTIONS and v]
    return found
