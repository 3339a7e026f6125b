"""What a route asks for: who is asking (read or operator), and a Client that writes
them to the audit log."""

from __future__ import annotations

from fastapi import HTTPException, Request

from cronsvc.client.client import Client
from cronsvc.clock import iso_utc
from cronsvc.config.jobfile import JobFile
from cronsvc.config.models import Config
from cronsvc.web.security import Identity


def identity(request: Request) -> Identity:
    """The caller (the gate answered 401 to anyone else: :mod:`cronsvc.web.middleware`)."""
    who: Identity = request.state.identity
    return who


def reader(request: Request) -> Client:
    """A Client for a caller who may read: anyone the gate let through."""
    client: Client = request.app.state.client
    return client


def operator(request: Request) -> Client:
    """A Client acting as the caller, who must hold an operator token (403 otherwise)."""
    who = identity(request)
    if not who.operator:
        raise HTTPException(403, f"{who.name} holds a read-only token: this needs an "
                                 "operator token")
    client: Client = request.app.state.client
    return client.acting_as(who.actor)


def job_file(request: Request) -> Config | None:
    """The job file of the web server, the last good one (definitions as its workers see
    them), or None."""
    owner: JobFile | None = request.app.state.job_file
    return owner.config if owner is not None else None


def file_warnings(request: Request) -> list[str]:
    """What the pages say of the web server's own job file: broken since when, and why."""
    owner: JobFile | None = request.app.state.job_file
    broken = owner.broken if owner is not None else None
    if broken is None:
        return []
    return [f"the web server's job file {owner} is rejected since {iso_utc(broken.since_ms)}: "
            f"{broken.problems[0] if broken.problems else '?'}; it shows the last good one"]
