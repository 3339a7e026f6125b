"""The one shape of every error the web answers: JSON ``{"error": ..., "status": ...}``
for the API and scripts, the error page for a browser; never a stack trace."""

from __future__ import annotations

from typing import Any

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


def json_problem(body: bytes, error: dict[str, Any]) -> str:
    """A body that is not JSON, located: ``body: not JSON at line 2, column 6: Expecting ':'
    delimiter`` (``error`` is the validation error, whose loc holds the offset)."""
    loc: tuple[Any, ...] = tuple(error.get("loc") or ())
    offset = loc[1] if len(loc) > 1 and isinstance(loc[1], int) else None
    why = (error.get("ctx") or {}).get("error") or "not JSON"
    if offset is None:
        return f"body: not JSON: {why}"
    before = body.decode("utf-8", errors="replace")[:offset]  # the offset counts characters
    line, column = before.count("\n") + 1, len(before) - (before.rfind("\n") + 1) + 1
    return f"body: not JSON at line {line}, column {column}: {why}"
