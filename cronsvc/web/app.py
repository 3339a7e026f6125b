"""The ASGI app: the API under ``/api/v1``, the pages, the static files, and one error
reply for everything that goes wrong (JSON for the API, a page for a browser; never a
stack trace), behind the gate of :mod:`cronsvc.web.middleware`."""

from __future__ import annotations

import logging
from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import Response
from fastapi.staticfiles import StaticFiles
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp

from cronsvc.client import OUTAGES
from cronsvc.client.client import Client
from cronsvc.config.jobfile import JobFile
from cronsvc.errors import (
    BadArgument,
    BadSchedule,
    BadTime,
    ConfigError,
    CronsvcError,
    RedisUnavailable,
    ScheduleError,
    StillRunning,
    UnknownFire,
    UnknownJob,
    UnknownSchedule,
)
from cronsvc.web.hosts import AllowedHosts
from cronsvc.web.middleware import Gate, SecureHeaders
from cronsvc.web.replies import error_reply, json_problem
from cronsvc.web.security import Guard
from cronsvc.web.sessions import Sessions
from cronsvc.web.settings import WebSettings
from cronsvc.web.tokens import Token

log = logging.getLogger("cronsvc.web")

STATIC = Path(__file__).parent / "static"

_STATUS: list[tuple[type[Exception], int]] = [
    (UnknownJob, 404), (UnknownFire, 404), (UnknownSchedule, 404),
    (BadArgument, 400), (BadTime, 400), (BadSchedule, 400), (ScheduleError, 400),
    (ConfigError, 400), (StillRunning, 409), (RedisUnavailable, 503),
]


def status_of(exc: Exception) -> int:
    """The HTTP status of an error the Client raised."""
    if isinstance(exc, OUTAGES):  # a script's own refusal is a CronsvcError, judged below
        return 503
    for kind, status in _STATUS:
        if isinstance(exc, kind):
            return status
    return 409 if isinstance(exc, CronsvcError) else 500


def create_app(client: Client, tokens: list[Token], job_file: JobFile | None,
               hosts: AllowedHosts, settings: WebSettings) -> ASGIApp:
    """The web app on ``client``, answering to ``hosts``; ``job_file`` is the job file whose
    definitions it shows (the last good one). ConfigError if the session key cannot be
    kept."""
    from cronsvc.web import api, pages, schedule_pages, signin

    # The docs page's script and style ship in the wheel (static/vendor): no CDN.
    app = FastAPI(title="cronsvc", version="1", docs_url=None,
                  openapi_url="/api/openapi.json", redoc_url=None)
    app.state.client = client
    app.state.job_file = job_file
    # No tokens: nobody signs in, and nothing is written to the state dir.
    sessions = Sessions(settings.state_dir, settings.session_ttl) if tokens else None
    app.state.guard = Guard(tokens, sessions)
    app.add_middleware(Gate, guard=app.state.guard, hosts=hosts,
                       max_body=settings.max_body, proxies=settings.trusted_proxies)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> Response:
        return error_reply(request, exc.status_code, str(exc.detail))

    @app.exception_handler(RequestValidationError)
    async def bad_request(request: Request, exc: RequestValidationError) -> Response:
        problems = []
        for e in exc.errors():
            if e.get("type") == "json_invalid":  # loc: ("body", the offset where it broke)
                problems.append(json_problem(await request.body(), e))
                continue
            where = ".".join(str(p) for p in e.get("loc", ()) if p != "body")
            problems.append(f"{where}: {e.get('msg', 'invalid')}")
        return error_reply(request, 422, "; ".join(problems) or "invalid request")

    async def refused(request: Request, exc: Exception) -> Response:
        status = status_of(exc)
        if status == 503:
            return error_reply(request, 503, f"Redis is unreachable: {exc}")
        return error_reply(request, status, str(exc))

    expected: tuple[type[Exception], ...] = (CronsvcError, *OUTAGES)
    for kind in expected:  # answered, not logged as a crash
        app.add_exception_handler(kind, refused)

    @app.exception_handler(Exception)
    async def failed(request: Request, exc: Exception) -> Response:
        log.error("%s %s failed: %r", request.method, request.url.path, exc, exc_info=exc)
        return error_reply(request, 500, "internal error (the server log has the details)")

    @app.get("/api/docs", include_in_schema=False)
    def docs(request: Request) -> Response:
        return pages.templates.TemplateResponse(request, "api_docs.html",
                                                {"openapi_url": app.openapi_url})

    @app.get("/healthz", include_in_schema=False)
    def healthz() -> dict[str, str]:
        return {"status": "ok"}

    app.include_router(api.router)
    app.include_router(signin.router)
    app.include_router(pages.router)
    app.include_router(schedule_pages.router)
    app.mount("/static", StaticFiles(directory=STATIC), name="static")
    return SecureHeaders(app)
