"""The dashboard's pages, rendered on the server with Jinja2 from what the Client reads.

Every page is one template; a page refreshes the part marked ``#live`` every few
seconds by fetching itself again (plain JavaScript, ``static/app.js``), so a run shows up
without a reload. Actions are form posts (CSRF token in a hidden field) that answer
with a redirect back and a one-line message. Nothing here edits a job's definition: the
job file stays the only source of what runs.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

from fastapi import APIRouter, Depends, Form, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from fastapi.templating import Jinja2Templates

from cronsvc.client.client import Client
from cronsvc.client.views import JobInfo, LiveChunk, records
from cronsvc.clock import iso_utc, ms_to_dt
from cronsvc.config.models import Config, Job
from cronsvc.durations import spoken
from cronsvc.kinds import KINDS
from cronsvc.schedule.expand import Fire, upcoming
from cronsvc.schedule.runtime import RuntimeSchedule
from cronsvc.web.api import STATUSES, definition, file_job, job_page, job_status, offset
from cronsvc.web.deps import file_warnings, job_file, operator, reader
from cronsvc.web.security import CSRF_COOKIE, CSRF_FIELD

router = APIRouter(include_in_schema=False)
templates = Jinja2Templates(directory=str(Path(__file__).parent / "templates"))

PAGE_SIZE = 50
#: The overview's timeline reads the newest runs of this many jobs at most.
TIMELINE_JOBS = 300
HOUR_MS = 3_600_000
STRIP = 20  # outcomes in a job's strip
NEXT = 10  # next fires of a job


def _time(ms: int | None) -> dict[str, Any] | None:
    """A time for templates: ms, ISO UTC text, and the whole second it is shown to (the
    page shows that in the viewer's zone, and the UTC time to the ms on hover)."""
    if ms is None:
        return None
    ms = int(ms)
    second = ms - ms % 1000
    return {"ms": ms, "utc": iso_utc(ms), "second": second, "second_utc": iso_utc(second)}


def _duration(ms: int | float | None) -> str:
    return "" if ms is None else spoken(ms)


templates.env.globals.update(t=_time, duration=_duration, quote=quote)


def render(request: Request, name: str, **context: Any) -> HTMLResponse:
    """A page, with what every page needs (who is asking, the CSRF token and its cookie,
    the message)."""
    who = request.state.identity
    response = templates.TemplateResponse(request, name, {
        "who": who, "csrf": request.state.csrf, "csrf_field": CSRF_FIELD,
        "message": request.query_params.get("msg"), "path": request.url.path, **context})
    if CSRF_COOKIE not in request.cookies:
        response.set_cookie(CSRF_COOKIE, request.state.csrf, **cookie_options(request))
    return response


def cookie_options(request: Request) -> dict[str, Any]:
    """Cookies go back only to this site's own pages, and only over HTTPS when the
    browser came over HTTPS."""
    return {"samesite": "strict", "secure": request.state.https, "path": "/"}


def error_page(request: Request, status: int, message: str) -> Response:
    return templates.TemplateResponse(request, "error.html", {
        "who": getattr(request.state, "identity", None), "csrf": "", "csrf_field": CSRF_FIELD,
        "message": None, "path": request.url.path, "status": status, "error": message},
        status_code=status)


def back(to: str, message: str) -> RedirectResponse:
    """After an action: the page it came from, saying what happened."""
    sep = "&" if "?" in to else "?"
    return RedirectResponse(f"{to}{sep}{urlencode({'msg': message})}", status_code=303)


def safe_next(to: str | None, default: str = "/") -> str:
    """Only a path of this site (no open redirect)."""
    return to if to and to.startswith("/") and not to.startswith("//") else default


# -- overview --------------------------------------------------------------------------
@dataclass
class Health:
    planners: int
    workers: int
    busy: int
    slots: int
    due: int
    ahead: int
    lateness_ms: int
    dead: int
    failed_hour: int
    runs_hour: int


@router.get("/")
def overview(request: Request, client: Client = Depends(reader)) -> Response:
    status = client.status()
    status.warnings[:0] = file_warnings(request)
    queue = client.queue(limit=10)
    dead = client.dead()
    now = status.now_ms
    names = client.published_jobs()
    runs = _recent_runs(client, names[:TIMELINE_JOBS], now - HOUR_MS)
    live_workers = [w for w in status.workers if w.alive]
    health = Health(
        planners=sum(p.alive for p in status.planners), workers=len(live_workers),
        busy=sum(int(w.info.get("busy") or 0) for w in live_workers),
        slots=sum(int(w.info.get("slots") or 0) for w in live_workers),
        due=queue.due_count, ahead=queue.ahead_count, lateness_ms=queue.lateness_ms,
        dead=len(dead), runs_hour=len(runs),
        failed_hour=sum(r["status"] not in ("ok", "skipped", "missed") for r in runs))
    return render(request, "overview.html", status=status, health=health, queue=queue,
                  timeline=_timeline(runs, now), jobs=len(names),
                  partial_jobs=len(names) > TIMELINE_JOBS, timeline_jobs=TIMELINE_JOBS)


def _recent_runs(client: Client, names: list[str], since_ms: int) -> list[dict[str, Any]]:
    """History records of ``names`` that started (or were decided) since ``since_ms``."""
    found = []
    for lines in client.histories(names, 100):
        for r in records("", lines, []):  # a line that is no record is left out
            at = r.get("started") or r.get("scheduled") or 0
            if isinstance(at, int) and at >= since_ms and isinstance(r.get("fire"), str):
                found.append(r)
    return found


def _timeline(runs: list[dict[str, Any]], now: int, buckets: int = 60) -> dict[str, Any]:
    """Runs per minute of the last hour, ok / failed / late (started a minute or more after
    their time), as bars for an SVG chart."""
    counts = [Counter[str]() for _ in range(buckets)]
    for r in runs:
        at = r.get("started") or r.get("scheduled") or 0
        i = buckets - 1 - (now - at) * buckets // HOUR_MS
        if 0 <= i < buckets:
            late = r.get("started") and r.get("scheduled") and \
                r["started"] - r["scheduled"] >= 60_000
            kind = "ok" if r["status"] == "ok" else (
                "skipped" if r["status"] in ("skipped", "missed") else "failed")
            counts[i]["late" if kind == "ok" and late else kind] += 1
    top = max([sum(c.values()) for c in counts] + [1])
    bars = [{"minute": i, "ok": c["ok"], "late": c["late"], "failed": c["failed"],
             "skipped": c["skipped"], "total": sum(c.values())} for i, c in enumerate(counts)]
    return {"bars": bars, "top": top, "start": _time(now - HOUR_MS), "end": _time(now)}


# -- jobs ------------------------------------------------------------------------------
@router.get("/jobs")
def jobs(request: Request, q: str = "", tag: str = "", status: str = "",
         cursor: str | None = None, client: Client = Depends(reader),
         config: Config | None = Depends(job_file)) -> Response:
    page, following, total = job_page(client, config, q=q, tag=tag,
                                      status=status if status in STATUSES else "",
                                      offset=offset(cursor), limit=PAGE_SIZE)
    rows = [_row(info, config) for info in page]
    all_tags = sorted({t for j in (config.jobs.values() if config else []) for t in j.tags})
    return render(request, "jobs.html", rows=rows, q=q, tag=tag, status=status,
                  first=not cursor, following=following, total=total, tags=all_tags)


def _row(info: JobInfo, config: Config | None) -> dict[str, Any]:
    job = file_job(config, info.name)
    return {"info": info, "status": job_status(info), "tags": job.tags if job else (),
            "summary": (job.description if job else "") or "",
            # Where it is written, once some jobs are declared in Python.
            "at": job.declared_at if job and config and config.discover else "",
            "last": info.last_run, "next": _time(info.next_fire_ms)}


@router.get("/jobs/{name}")
def one_job(request: Request, name: str, cursor: str | None = None,
            client: Client = Depends(reader), config: Config | None = Depends(job_file)
             ) -> Response:
    info = client.job(name)
    history = client.history(name, 100)
    count = client.count_schedules(job=name)
    # Listing walks the schedules of every job: only when this one has some.
    page = client.schedules(job=name, cursor=cursor, limit=20) if count else None
    durations = [h for h in reversed(history) if h.get("duration_ms") is not None][-50:]
    schedules = page.schedules if page else []
    return render(request, "job.html", info=info, status=job_status(info),
                  definition=_definition(file_job(config, name)),
                  upcoming=next_fires(client.upcoming(name, NEXT), schedules,
                                      client.server_ms()),
                  history=history, recent=history[:STRIP], chart=_durations(durations),
                  schedules=schedules, cursor=page.cursor if page else None,
                  schedule_count=count)


def next_fires(own: list[Fire], schedules: list[RuntimeSchedule], now_ms: int,
               count: int = NEXT) -> list[dict[str, Any]]:
    """The next fires of a job: its own schedule's and its runtime schedules' (those
    given), soonest first, each with the id of the schedule it is of (None: the job's)."""
    after = ms_to_dt(now_ms)
    found: list[dict[str, Any]] = [{"fire": f, "schedule": None} for f in own]
    for s in schedules:
        if not s.paused:
            found += [{"fire": f, "schedule": s.id} for f in upcoming(s.spec, after, count)]
    found.sort(key=lambda x: x["fire"].utc)
    return found[:count]


#: Shown from the published policy above the definition's rows, not again in them.
_POLICY_SHOWN = {"kind", "overlap", "catch_up", "starting_deadline"}
#: Fields of a definition that are seconds: written as durations (``1 h``).
_SECONDS = {"timeout", "jitter", "request_timeout"}


def _definition(job: Job | None) -> list[tuple[str, str]]:
    """The rows of :func:`cronsvc.web.api.definition` the page shows: the ones set, each
    written as the job's kind writes it (env's and tags' names as a list)."""
    if job is None:
        return []
    kind = KINDS[job.kind]
    rows = []
    for field, value in (definition(job) or {}).items():
        if field in _POLICY_SHOWN or value in (None, "", 0, False, [], {}, ()):
            continue
        if field in ("env", "tags"):
            text = ", ".join(value)
        elif field in _SECONDS and isinstance(value, int | float):
            text = spoken(value * 1000)
        else:
            text = kind.text(field, value)
        rows.append((field, text))
    return rows


def _durations(records: list[dict[str, Any]]) -> dict[str, Any]:
    """Bars of run durations, oldest first."""
    top = max([r["duration_ms"] for r in records] + [1])
    return {"top": top, "bars": [{"ms": r["duration_ms"], "ok": r.get("status") == "ok",
                                  "fire": r.get("fire")} for r in records]}


@router.post("/jobs/{name}/pause")
def pause(request: Request, name: str, note: str = Form(""), to: str = Form("/jobs"),
          client: Client = Depends(operator)) -> Response:
    client.pause(name, note or None)
    return back(safe_next(to), f"{name} paused")


@router.post("/jobs/{name}/resume")
def resume(request: Request, name: str, to: str = Form("/jobs"),
           client: Client = Depends(operator)) -> Response:
    client.resume(name)
    return back(safe_next(to), f"{name} resumed")


# -- dead letters ----------------------------------------------------------------------
@router.get("/dead")
def dead(request: Request, job: str = "", page: int = 1,
         client: Client = Depends(reader)) -> Response:
    fires = client.dead(job or None)
    page = max(page, 1)
    start = (page - 1) * PAGE_SIZE
    return render(request, "dead.html", fires=fires[start:start + PAGE_SIZE], job=job,
                  page=page, more=start + PAGE_SIZE < len(fires), total=len(fires))


@router.post("/dead/retry")
def dead_retry(request: Request, fire: list[str] = Form(default_factory=list),
               client: Client = Depends(operator)) -> Response:
    done, problems = 0, []
    for fid in fire:
        try:
            client.dead_retry(fid)
            done += 1
        except Exception as exc:  # noqa: BLE001 - each fire says its own problem
            problems.append(f"{fid}: {exc}")
    text = f"{done} fire(s) queued again" + (f"; {'; '.join(problems[:3])}" if problems else "")
    return back("/dead", text)


@router.post("/dead/purge")
def dead_purge(request: Request, job: str = Form(""), fire: list[str] = Form(default_factory=list),
               client: Client = Depends(operator)) -> Response:
    if not fire and not job:
        return back("/dead", "nothing chosen: tick dead fires, or purge a job's")
    gone = client.dead_purge(job or None, fires=fire or None)
    return back("/dead", f"{gone} dead fire(s) purged")


# -- fleet and audit -------------------------------------------------------------------
@router.get("/fleet")
def fleet(request: Request, client: Client = Depends(reader)) -> Response:
    return render(request, "fleet.html", status=client.status(), queue=client.queue(limit=20))


@router.get("/audit")
def audit(request: Request, cursor: int | None = None,
          client: Client = Depends(reader)) -> Response:
    page = client.audit(limit=PAGE_SIZE, cursor=cursor)
    return render(request, "audit.html", actions=page.actions, cursor=page.cursor)


@router.get("/fires/{fire_id:path}")
def fire_page(request: Request, fire_id: str, client: Client = Depends(reader)) -> Response:
    view = client.fire(fire_id)
    going = view.state in GOING
    return render(request, "fire.html", fire=view.fire, job=view.job, due=_time(view.due_ms),
                  state=view.state, attempts=view.attempts,
                  live=live_text(client.live_output(fire_id)) if going else None)


#: A fire in these states may print more: its page shows its live output and looks again
#: every second.
GOING = ("queued", "running")
LIVE_SHOWN = 64 * 1024  # characters of a run's live output a page shows, the last


def live_text(chunks: list[LiveChunk]) -> tuple[int, str] | None:
    """The attempt and the output so far of the newest run that streamed, its end."""
    if not chunks:
        return None
    attempt = chunks[-1].attempt
    text = "".join(c.text for c in chunks if c.attempt == attempt)
    return attempt, text[-LIVE_SHOWN:]
