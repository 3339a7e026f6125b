"""The URLs of the job file that cronsvc sends to (webhooks, Slack and Teams, pings,
SMTP servers): what each must look like, checked when the file is read and again, with
every ``${VAR}`` filled in, when sending."""

from __future__ import annotations

from urllib.parse import urlsplit

from cronsvc.secrets import VAR

HTTP = ("http", "https")
SMTP = ("smtp", "smtps")


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
