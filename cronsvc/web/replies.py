"""The one shape of every error the web answers: JSON ``{"error": ..., "status": ...}``
for the API and scripts, the error page for a browser; never a stack trace."""

from __future__ import annotations

from fastapi import Request
from fastapi.responses import JSONResponse, Response


def wants_json(request: Request) -> bool:
    return request.url.path.startswith("/api/") or \
        "text/html" not in request.headers.get("accept", "")


def error_reply(request: Request, status: int, message: str) -> Response:
    """``{"error": message, "status": status}``, or the error page for a browser."""
    if wants_json(request):
        return JSONResponse({"error": message, "status": status}, status_code=status)
    from cronsvc.web.pages import error_page

    return error_page(request, status, message)
