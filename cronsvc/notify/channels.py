"""Sending one event through one channel.

Secrets (``${VAR}`` anywhere in a channel's text) are read from the environment when
sending, and an error names the channel and the variable, never a secret's value: URLs
are shown by scheme and host only (a Slack or Teams webhook URL is itself a secret).

What a job printed reaches people as text: a chat message escapes it so that it cannot
mention everyone or hide a link. A POST follows no redirect (the rules of
:func:`cronsvc.outbound.client_settings`, which an ``http`` job follows too), and mail
goes only over TLS whose certificate was verified, unless the channel says
``insecure_plaintext: true``.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import smtplib
import socket
import ssl
import subprocess
from collections.abc import Mapping
from email.message import EmailMessage
from email.utils import make_msgid, parseaddr
from urllib.parse import unquote, urlsplit

import httpx

from cronsvc.config.models import Channel
from cronsvc.errors import CronsvcError
from cronsvc.notify.events import Event
from cronsvc.outbound import (
    HTTP,
    SMTP,
    client_settings,
    first_line,
    redirect_target,
    shown,
    trust_store_context,
    url_problem,
)
from cronsvc.secrets import MissingVariable
from cronsvc.secrets import expand as environ_expand

USER_AGENT = "cronsvc-notify/1"
SIGNATURE_HEADER = "X-Cronsvc-Signature"
#: The mail header with the event's id (the same on every retry, as a webhook's
#: X-Cronsvc-Delivery).
EVENT_ID_HEADER = "X-Cronsvc-Event-Id"


class DeliveryError(CronsvcError):
    """A channel did not take the event (unreachable, refused, timed out)."""


def expand(text: str, where: str, environ: Mapping[str, str] | None = None) -> str:
    """``text`` with each ``${VAR}`` replaced from the environment (DeliveryError if one
    is not set)."""
    try:
        return environ_expand(text, where, environ)
    except MissingVariable as exc:
        raise DeliveryError(str(exc)) from exc


def sign(secret: str, body: bytes) -> str:
    """The signature header's value: ``sha256=`` and the hex HMAC-SHA256 of the body."""
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def send(name: str, channel: Channel, event: Event,
         environ: Mapping[str, str] | None = None) -> str:
    """Deliver ``event`` through the channel ``name``; a line saying where it went.
    DeliveryError otherwise (after one try: retries are the caller's)."""
    where = f"notify.{name}"
    if channel.webhook is not None:
        url = expand(channel.webhook, f"{where}.webhook", environ)
        body = event.body()
        headers = {"Content-Type": "application/json", "X-Cronsvc-Event": event.event,
                   "X-Cronsvc-Delivery": event.id}
        if channel.secret is not None:
            headers[SIGNATURE_HEADER] = sign(expand(channel.secret, f"{where}.secret",
                                                    environ), body)
        return post(where, url, body, headers, channel.timeout)
    if channel.slack is not None:
        url = expand(channel.slack, f"{where}.slack", environ)
        return post(where, url, json.dumps(slack_message(event)).encode(),
                     {"Content-Type": "application/json"}, channel.timeout)
    if channel.teams is not None:
        url = expand(channel.teams, f"{where}.teams", environ)
        return post(where, url, json.dumps(teams_message(event)).encode(),
                     {"Content-Type": "application/json"}, channel.timeout)
    if channel.email is not None:
        return _mail(where, channel, event, environ)
    assert channel.command is not None
    return _command(where, channel, event, environ)


# Slack's mrkdwn reads &, < and > as markup (<!channel>, <https://x|a link>): escaped as
# Slack asks, in every text field, they show as written and do nothing.
_SLACK = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;"})
# A Teams card's text is Markdown and some HTML: &, < and > as entities keep tags from
# acting, and [ ] as character references keep the output from making a link or an image
# (a backslash escape would be shown as is where the Markdown has none). Its title and
# summary are shown as they are: not escaped.
_TEAMS = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;", "[": "&#91;", "]": "&#93;"})
# A zero-width space after each backtick: no run of three in a job's output can close the
# code block (and let what follows it be markup), and what a reader sees is unchanged
# (only who copies it gets the invisible spaces too).
_BACKTICK = str.maketrans({"`": "`\u200b"})


def slack_message(event: Event) -> dict[str, object]:
    """A Slack incoming-webhook message: the title, and the details as a code block."""
    title = event.title().translate(_SLACK)
    details = event.text().translate(_SLACK).translate(_BACKTICK)
    return {"text": title,
            "blocks": [{"type": "section", "text": {"type": "mrkdwn", "text": f"*{title}*"}},
                       {"type": "section", "text": {"type": "mrkdwn",
                                                    "text": f"```{details}```"}}]}


def teams_message(event: Event) -> dict[str, object]:
    """A Teams incoming-webhook message card."""
    good = event.event in ("recovered", "test")
    return {"@type": "MessageCard", "@context": "https://schema.org/extensions",
            "summary": event.title(), "themeColor": "2E9E5B" if good else "D64545",
            "title": event.title(),
            "text": event.text().translate(_TEAMS).replace("\n", "  \n")}


def post(where: str, url: str, body: bytes, headers: dict[str, str], timeout: float) -> str:
    """POST ``body`` to ``url``; a line saying it was taken (a 2xx answer), else
    DeliveryError. A redirect is not followed: it fails, saying where it pointed."""
    problem = url_problem(url, HTTP)  # again: a ${VAR} may have held anything
    if problem:
        raise DeliveryError(f"{where}: {problem}")
    # A client per call: posts are few (an event, a ping) and come from several threads, so
    # nothing is shared between them and no connection stays open for a message minutes
    # away. The answer's body is not read: nothing in it is used.
    try:
        with httpx.Client(**client_settings(timeout)) as client:
            with client.stream("POST", url, content=body,
                               headers={"User-Agent": USER_AGENT, **headers}) as reply:
                status, location = reply.status_code, reply.headers.get("Location")
    except (httpx.HTTPError, httpx.InvalidURL) as exc:
        reason = first_line(exc) or type(exc).__name__
        raise DeliveryError(f"{where}: cannot reach {shown(url)}: {reason}") from None
    if 300 <= status < 400 and location:
        raise DeliveryError(f"{where}: {shown(url)} answered {status}, a redirect to "
                            f"{redirect_target(url, location)}: not followed")
    if not 200 <= status < 300:
        raise DeliveryError(f"{where}: {shown(url)} answered {status}")
    return f"{where}: {shown(url)} answered {status}"


def _mail(where: str, channel: Channel, event: Event,
          environ: Mapping[str, str] | None) -> str:
    assert channel.email is not None
    url = expand(channel.email.smtp, f"{where}.email.smtp", environ)
    problem = url_problem(url, SMTP)
    if problem:
        raise DeliveryError(f"{where}.email.smtp: {problem}")
    parts = urlsplit(url)
    assert parts.hostname is not None  # url_problem saw one
    message = EmailMessage()
    message["Subject"] = f"[cronsvc] {event.title()}"
    sender = channel.email.sender or f"cronsvc@{socket.gethostname()}"
    message["From"] = sender
    message["To"] = ", ".join(channel.email.to)
    # An event id has ':' in it, which cuts a Message-ID made of it short ("<dead"): the id
    # is made the usual way, under the sender's domain (make_msgid's default would ask DNS
    # for this host's FQDN, on every mail), and the event id has a header of its own.
    domain = parseaddr(sender)[1].rpartition("@")[2] or socket.gethostname()
    message["Message-ID"] = make_msgid(domain=domain)
    message[EVENT_ID_HEADER] = event.id
    message.set_content(event.text())
    # The system's trust store (SSL_CERT_FILE too), certificate and host name checked:
    # smtplib without a context checks neither, and anyone in the path gets the password.
    context = trust_store_context("smtp")
    try:
        if parts.scheme == "smtps":
            smtp: smtplib.SMTP = smtplib.SMTP_SSL(parts.hostname, parts.port or 465,
                                                  timeout=channel.timeout, context=context)
        else:
            smtp = smtplib.SMTP(parts.hostname, parts.port or 25, timeout=channel.timeout)
        with smtp:
            if parts.scheme == "smtp" and not channel.email.insecure_plaintext:
                smtp.ehlo()
                if not smtp.has_extn("starttls"):
                    raise DeliveryError(
                        f"{where}: {shown(url)} offers no STARTTLS: nothing sent (a relay "
                        "without TLS needs email.insecure_plaintext: true)")
                smtp.starttls(context=context)
                smtp.ehlo()
            if parts.username:
                smtp.login(unquote(parts.username), unquote(parts.password or ""))
            smtp.send_message(message)
    except ssl.SSLCertVerificationError as exc:
        raise DeliveryError(f"{where}: {shown(url)}: certificate not trusted: "
                            f"{exc.verify_message}") from None
    except (smtplib.SMTPException, OSError) as exc:
        raise DeliveryError(f"{where}: {shown(url)}: {type(exc).__name__}: "
                            f"{first_line(exc)}") from None
    return f"{where}: mailed {len(channel.email.to)} recipient(s) through {shown(url)}"


def _command(where: str, channel: Channel, event: Event,
             environ: Mapping[str, str] | None) -> str:
    assert channel.command is not None
    argv = [expand(a, f"{where}.command", environ) for a in channel.command]
    try:
        done = subprocess.run(argv, input=event.body(), capture_output=True,
                              timeout=channel.timeout, check=False)
    except FileNotFoundError:
        raise DeliveryError(f"{where}: command not found: {argv[0]}") from None
    except subprocess.TimeoutExpired:
        raise DeliveryError(f"{where}: {argv[0]} did not end within "
                            f"{channel.timeout:g}s") from None
    if done.returncode != 0:
        raise DeliveryError(f"{where}: {argv[0]} exited {done.returncode}: "
                            f"{first_line(done.stderr.decode(errors='replace'))}")
    return f"{where}: {argv[0]} took it"
