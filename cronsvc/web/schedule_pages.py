"""The dashboard's runtime schedules and one-off runs with a payload: a schedule's page,
the form that creates one for a job, its change, pause, resume and delete, and the form
that runs a job now with a payload. All of it goes through the Client, acting as the
operator who asks (so the audit log names them); a read-only caller sees no form and gets
403 for a post.

A schedule is data the job file lets callers add: the job it runs stays defined by the
file alone. The forms stand outside the part of the page that refreshes itself, so what
is typed stays.
"""

from __future__ import annotations

from typing import Annotated
from urllib.parse import quote

from fastapi import APIRouter, Depends, Form, Request
from fastapi.responses import Response

from cronsvc.client.client import Client
from cronsvc.errors import BadArgument, BadSchedule, BadTime, Skipped, UnknownJob, UnknownSchedule
from cronsvc.fires import schedule_of
from cronsvc.schedule.runtime import RuntimeSchedule
from cronsvc.schedule.words import describe_schedule
from cronsvc.web.deps import operator, reader
from cronsvc.web.pages import back, next_fires, render, safe_next
from cronsvc.web.schedule_form import field_of, fields, filled, kept, payload_of, values

router = APIRouter(include_in_schema=False)

#: What a form's input may be refused for: shown in the form, beside the field it names.
REFUSED = (BadSchedule, BadArgument, BadTime)


def _url(sid: str) -> str:
    return f"/schedules/{quote(sid)}"


# -- a schedule's page ------------------------------------------------------------------
@router.get("/schedules/{sid:path}")
def schedule_page(request: Request, sid: str, client: Client = Depends(reader)) -> Response:
    s = client.get_schedule(sid)
    return _page(request, client, s, filled(s), None, None)


def _page(request: Request, client: Client, s: RuntimeSchedule, values: dict[str, str],
          field: str | None, error: str | None, status: int = 200) -> Response:
    try:
        runs = [h for h in client.history(s.job, 100)
                if schedule_of(str(h.get("fire") or "")) == s.id]
    except UnknownJob:
        runs = []
    response = render(
        request, "schedule.html", s=s, words=describe_schedule(s.spec),
        upcoming=next_fires([], [s], client.server_ms()), runs=runs[:20],
        values=values, field=field, error=error, action=_url(s.id))
    response.status_code = status
    return response


async def posted(request: Request) -> dict[str, str]:
    """The text fields of a form post (the gate has read it for its CSRF token already)."""
    return {k: v for k, v in (await request.form()).items() if isinstance(v, str)}


@router.post("/schedules/{sid:path}")
def change_schedule(request: Request, sid: str, form: dict[str, str] = Depends(posted),
                    client: Client = Depends(operator)) -> Response:
    """The form's ``do``: ``save`` it (the default), ``pause``, ``resume`` or ``delete``."""
    do = form.get("do", "save")
    if do == "pause":
        client.pause_schedule(sid)
        return back(_url(sid), f"{sid} paused")
    if do == "resume":
        client.resume_schedule(sid)
        return back(_url(sid), f"{sid} resumed")
    if do == "delete":
        s = client.get_schedule(sid)
        client.delete_schedule(sid)
        return back(f"/jobs/{quote(s.job)}", f"{sid} deleted")
    s = client.get_schedule(sid)
    try:
        change = {**kept(s), **fields(form, sid), "paused": s.paused}
        outcome = client.upsert_schedule(sid, job=s.job, **change)
    except REFUSED as exc:
        return _page(request, client, s, values(form), field_of(str(exc)), str(exc), 400)
    return back(_url(sid), f"{sid} {outcome}")


# -- a new schedule ---------------------------------------------------------------------
@router.get("/jobs/{name}/schedules/new")
def new_schedule(request: Request, name: str, client: Client = Depends(operator)) -> Response:
    client.job(name)  # 404 for a job the planners did not publish
    return _new(request, name, {"id": f"{name}:", "timezone": "UTC"}, None, None)


def _new(request: Request, job: str, values: dict[str, str], field: str | None,
         error: str | None, status: int = 200) -> Response:
    response = render(request, "schedule_new.html", job=job, values=values, field=field,
                      error=error, action=f"/jobs/{quote(job)}/schedules")
    response.status_code = status
    return response


@router.post("/jobs/{name}/schedules")
def create_schedule(request: Request, name: str, form: dict[str, str] = Depends(posted),
                    client: Client = Depends(operator)) -> Response:
    sid = form.get("id", "").strip()
    try:
        client.get_schedule(sid)
    except UnknownSchedule:
        pass
    else:
        return _new(request, name, values(form), "id",
                    f"schedule {sid!r}: id: one with this id exists already: change it "
                    "on its own page", 400)
    try:
        client.upsert_schedule(sid, job=name, **fields(form, sid))
    except REFUSED as exc:
        return _new(request, name, values(form), field_of(str(exc)), str(exc), 400)
    return back(_url(sid), f"{sid} created")


# -- run now, with a payload ------------------------------------------------------------
@router.get("/jobs/{name}/run")
def run_form(request: Request, name: str, client: Client = Depends(operator)) -> Response:
    client.job(name)
    return render(request, "run.html", job=name, payload="", error=None)


@router.post("/jobs/{name}/trigger")
def trigger(request: Request, name: str, to: Annotated[str, Form()] = "/jobs",
            payload: Annotated[str, Form()] = "",
            client: Client = Depends(operator)) -> Response:
    """Run now; with a payload from the run form, which shows what is wrong with one."""
    try:
        fid = client.trigger(name, payload_of(payload, "payload"),
                             note="run now from the dashboard")
    except BadArgument as exc:
        response = render(request, "run.html", job=name, payload=payload, error=str(exc))
        response.status_code = 400
        return response
    except Skipped as exc:  # not queued: said on the page it came from, as any outcome
        return back(safe_next(to), str(exc))
    return back(safe_next(to), f"{name} runs now ({fid})")
