"""Signing in and out of the dashboard: the form, a new session for a known token, and
the end of it (:mod:`cronsvc.web.sessions`). The gate checked the form's CSRF token
before any of these runs (:mod:`cronsvc.web.middleware`)."""

from __future__ import annotations

from fastapi import APIRouter, Form, Request
from fastapi.responses import RedirectResponse, Response

from cronsvc.web.pages import cookie_options, render, safe_next
from cronsvc.web.security import SESSION_COOKIE, Guard

router = APIRouter(include_in_schema=False)


@router.get("/login")
def login_form(request: Request, next: str = "/") -> Response:
    return render(request, "login.html", next=safe_next(next), failed=False)


@router.post("/login")
def login(request: Request, token: str = Form(""), next: str = Form("/")) -> Response:
    guard: Guard = request.app.state.guard
    found = guard.find(token.strip())
    if found is None or guard.sessions is None:
        return render(request, "login.html", next=safe_next(next), failed=True)
    response = RedirectResponse(safe_next(next), status_code=303)
    response.set_cookie(SESSION_COOKIE, guard.sessions.start(found), httponly=True,
                        max_age=int(guard.sessions.ttl), **cookie_options(request))
    return response


@router.post("/logout")
def logout(request: Request) -> Response:
    """Sign out: the session ends on the server too, not only in this browser."""
    guard: Guard = request.app.state.guard
    if guard.sessions is not None:
        guard.sessions.end(request.cookies.get(SESSION_COOKIE))
    response = RedirectResponse("/login", status_code=303)
    response.delete_cookie(SESSION_COOKIE, **cookie_options(request))
    return response
