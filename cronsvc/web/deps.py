"""What a route asks for: who is asking (read or operator), and a Client that writes
them to the audit log."""

from __future__ import annotations

from typing import Any

from fastapi import HTTPException, Request

from cronsvc.client.client import Client
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
    """The job file the web server was started with (definitions as its workers see them),
    or None."""
    config: Any = request.app.state.config
    return config  # type: ignore[no-any-return]
