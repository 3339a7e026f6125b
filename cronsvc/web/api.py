"""``/api/v1``: everything the Client does, as JSON resources.

Reads need a read token, changes an operator token (on an open loopback server, anyone);
every change is in the audit log under the caller's token name. Lists are pages with a
``cursor`` to pass back. Errors are ``{"error": ..., "status": ...}`` (see
:mod:`cronsvc.web.app`).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from fastapi import APIRouter, Body, Depends, HTTPException, Query, Request, Response

from cronsvc.client.client import Client
from cronsvc.client.views import JobInfo
from cronsvc.clock import iso_utc
from cronsvc.config.models import Config, Job
from cronsvc.errors import BadArgument, CronsvcError
from cronsvc.kinds import KINDS
from cronsvc.web.deps import job_file, operator, reader
from cronsvc.web.models import (
    AtBody,
    AuditItem,
    DeadItem,
    FiresBody,
    FireTime,
    JobDetail,
    JobItem,
    Note,
    Page,
    PurgeBody,
    ResumeBody,
    ScheduleBody,
    TriggerBody,
    plain,
)

router = APIRouter(prefix="/api/v1")
STATUSES = ("ok", "failed", "paused", "never")
MAX_LIMIT = 500


# -- jobs ------------------------------------------------------------------------------
def job_status(info: JobInfo) -> str:
    """ok, failed, paused or never: what the jobs list filters on."""
    if info.paused:
        return "paused"
    if info.last_run is None:
        return "never"
    return "ok" if info.last_run.get("status") == "ok" else "failed"


def offset(cursor: str | None) -> int:
    """The position a page's cursor stands for."""
    if not cursor:  # none, or empty: the first page
        return 0
    if not cursor.isdigit():
        raise BadArgument(f"cursor: {cursor!r} is not one a page gave")
    return int(cursor)


#: Jobs read at once when a status filter reads them all.
STATUS_CHUNK = 500


def job_page(client: Client, config: Config | None, *, q: str = "", tag: str = "",
             status: str = "", offset: int = 0, limit: int = 50
             ) -> tuple[list[JobInfo], int | None, int]:
    """A page of jobs by name: (jobs, offset of the next page or None, how many match
    every filter). Without a status filter only the page's jobs are read in full; a status
    is the last run's, so with one every job of the name and tag is read, in chunks, to
    count those that match."""
    names = [n for n in client.published_jobs()
             if q.lower() in n.lower() and (not tag or tag in _tags(config, n))]
    if not status:
        page = client.jobs_named(names[offset:offset + limit])
        following = offset + limit
        return page, following if following < len(names) else None, len(names)
    at = {name: i for i, name in enumerate(names)}
    found: list[JobInfo] = []
    next_at: int | None = None
    total = 0
    for start in range(0, len(names), STATUS_CHUNK):
        for info in client.jobs_named(names[start:start + STATUS_CHUNK]):
            if job_status(info) != status:
                continue
            total += 1
            if at[info.name] < offset:
                continue
            if len(found) < limit:
                found.append(info)
            elif next_at is None:  # the next page starts at the first one left out
                next_at = at[info.name]
    return found, next_at, total


def file_job(config: Config | None, name: str) -> Job | None:
    """The job as the web's own job file defines it, if it does."""
    return config.jobs.get(name) if config else None


def _tags(config: Config | None, name: str) -> tuple[str, ...]:
    job = file_job(config, name)
    return job.tags if job else ()


def job_json(info: JobInfo, config: Config | None) -> dict[str, Any]:
    """A job as the API shows it (:class:`cronsvc.web.models.JobItem`)."""
    out = plain(info)
    job = file_job(config, info.name)
    described = (job.description if job else "") or ""
    out.update(schedule_words=out.pop("description"), description=described,
               summary=described, status=job_status(info),
               tags=list(job.tags) if job else [])
    return out  # type: ignore[no-any-return]


def definition(job: Job | None) -> dict[str, Any] | None:
    """What the worker runs, from the web's job file; environment values stay out (they
    may be secrets): only their names."""
    if job is None:
        return None
    out: dict[str, Any] = {"kind": job.kind, **KINDS[job.kind].shown(job)}
    out["env"] = sorted(job.env)
    for field in ("cwd", "timeout", "retries", "overlap", "catch_up", "starting_deadline",
                  "jitter", "description"):
        out[field] = getattr(job, field, None)
    out["tags"] = list(job.tags)
    out["max_concurrent"] = job.max_concurrent
    out["limits"] = dict(job.slot_limits)
    out["notify"] = list(job.notify)
    out["notify_on"] = list(job.notify_on) if job.notify else []
    out["pause_after_failures"] = job.pause_after_failures
    out["on_success"] = list(job.on_success)
    out["on_failure"] = list(job.on_failure)
    out["declared_at"] = job.declared_at  # schedules.yaml:14, or proj/jobs.py:12
    return out


@router.get("/jobs", summary="Jobs, a page at a time")
def list_jobs(q: str = "", tag: str = "",
              status: str = Query("", pattern="^(|ok|failed|paused|never)$"),
              cursor: str | None = None, limit: int = Query(50, ge=1, le=MAX_LIMIT),
              client: Client = Depends(reader),
              config: Config | None = Depends(job_file)) -> Page[JobItem]:
    page, following, total = job_page(client, config, q=q, tag=tag, status=status,
                                      offset=offset(cursor), limit=limit)
    return Page[JobItem](items=[JobItem(**job_json(j, config)) for j in page],
                cursor=None if following is None else str(following), total=total,
                unreadable=getattr(page, "unreadable", []))


@router.get("/jobs/{name}", summary="One job: schedule, next fires, last run, definition")
def get_job(name: str, client: Client = Depends(reader),
            config: Config | None = Depends(job_file)) -> JobDetail:
    return JobDetail(**job_json(client.job(name), config),
                     definition=definition(file_job(config, name)),
                     next=[FireTime(at_ms=ms, at=iso_utc(ms)) for ms in client.next_fires(name, 5)])


@router.get("/jobs/{name}/next", summary="The next fire times, with DST notes")
def next_fires(name: str, count: int = Query(10, ge=1, le=1000),
               client: Client = Depends(reader)) -> list[dict[str, Any]]:
    return [{"at_ms": int(f.utc.timestamp() * 1000), "at": iso_utc(int(f.utc.timestamp() * 1000)),
             "local": f.local.isoformat(), "runs": f.runs, "note": f.note}
            for f in client.upcoming(name, count)]


@router.get("/jobs/{name}/history", summary="The job's newest history records")
def history(name: str, limit: int = Query(50, ge=1, le=MAX_LIMIT),
            client: Client = Depends(reader)) -> list[dict[str, Any]]:
    return [plain(_times(h)) for h in client.history(name, limit)]


def _times(record: dict[str, Any]) -> dict[str, Any]:
    out = dict(record)
    for field in ("scheduled", "started"):
        if isinstance(out.get(field), int):
            out[f"{field}_at"] = iso_utc(out[field])
    return out


@router.post("/jobs/{name}/pause", summary="Pause: no new fire of the job starts")
def pause(name: str, body: Note | None = Body(default=None),
          client: Client = Depends(operator)) -> dict[str, Any]:
    done = client.pause(name, (body or Note()).note)
    return plain(done)  # type: ignore[no-any-return]


@router.post("/jobs/{name}/resume", summary="Resume a paused job")
def resume(name: str, body: ResumeBody | None = Body(default=None),
           client: Client = Depends(operator)) -> dict[str, Any]:
    b = body or ResumeBody()
    done = client.resume(name, catch_up=b.catch_up, note=b.note)
    return {**plain(done), "resumed": bool(done)}


@router.post("/jobs/{name}/trigger", summary="Run the job once now",
             responses={409: {"description": "not queued: the job's limits would skip it now "
                                             "(overlap, max_concurrent, a named limit); "
                                             "{error, status} says why"}})
def trigger(name: str, body: TriggerBody | None = Body(default=None),
            client: Client = Depends(operator)) -> dict[str, Any]:
    b = body or TriggerBody()
    fid = client.trigger(name, b.payload, note=b.note)
    return {"fire": fid, "job": name}


@router.post("/jobs/{name}/at", summary="Run the job once at a time")
def at(name: str, body: AtBody, client: Client = Depends(operator)) -> dict[str, Any]:
    when: int | datetime
    if isinstance(body.when, int):
        when = body.when
    else:
        try:
            when = datetime.fromisoformat(body.when)
        except ValueError:
            raise BadArgument(f"when: {body.when!r} is not an ISO 8601 time") from None
        if when.tzinfo is None:
            raise BadArgument(f"when: {body.when!r} has no zone (add Z or +01:00)")
    fid = client.enqueue(name, when, body.payload, note=body.note)
    return {"fire": fid, "job": name}


# -- fires, the queue, dead letters ------------------------------------------------------
@router.get("/queue", summary="Due fires, fires planned ahead, fires in flight")
def queue(limit: int = Query(50, ge=1, le=MAX_LIMIT),
          client: Client = Depends(reader)) -> dict[str, Any]:
    view = client.queue(limit=limit)
    return {**plain(view), "lateness_ms": view.lateness_ms}


@router.get("/fires/{fire_id:path}/output",
            summary="What a fire's runs printed while they went, after a chunk")
def fire_output(fire_id: str, after: str = Query("0-0", pattern=r"^\d+-\d+$"),
                client: Client = Depends(reader)) -> dict[str, Any]:
    """Chunks ``{id, attempt, text, end}`` in order, and where the fire is: read again with
    ``after`` the last id until it is ``done`` or ``dead``."""
    chunks = client.live_output(fire_id, after)
    return {"fire": fire_id, "state": client.fire_state(fire_id),
            "chunks": [plain(c) for c in chunks], "after": chunks[-1].id if chunks else after}


@router.get("/fires/{fire_id:path}", summary="One fire: where it is, and its attempts")
def get_fire(fire_id: str, client: Client = Depends(reader)) -> dict[str, Any]:
    view = client.fire(fire_id)
    return {**plain(view), "attempts": [_times(a) for a in view.attempts]}


@router.post("/fires/{fire_id:path}/cancel", summary="Unqueue a fire that has not started")
def cancel(fire_id: str, body: Note | None = Body(default=None),
           client: Client = Depends(operator)) -> dict[str, Any]:
    if not client.cancel(fire_id, note=(body or Note()).note):
        raise HTTPException(409, f"fire {fire_id} is not queued (it is "
                                 f"{client.fire_state(fire_id)}): only a queued fire can be "
                                 "cancelled")
    return {"fire": fire_id, "cancelled": True}


@router.get("/dead", summary="Dead letters, most recently dead first")
def dead(job: str | None = None, cursor: str | None = None,
         limit: int = Query(50, ge=1, le=MAX_LIMIT),
         client: Client = Depends(reader)) -> Page[DeadItem]:
    found = client.dead(job)
    start = offset(cursor)
    following = start + limit
    return Page[DeadItem](items=[DeadItem(**plain(d)) for d in found[start:following]],
                cursor=str(following) if following < len(found) else None, total=len(found),
                unreadable=found.unreadable)


@router.post("/dead/retry", summary="Queue dead fires again, each with fresh attempts")
def retry_many(body: FiresBody, client: Client = Depends(operator)) -> dict[str, Any]:
    results = []
    for fid in body.fires:
        try:
            client.dead_retry(fid, note=body.note)
            results.append({"fire": fid, "retried": True})
        except CronsvcError as exc:
            results.append({"fire": fid, "retried": False, "error": str(exc)})
    return {"results": results, "retried": sum(r["retried"] for r in results)}


@router.post("/dead/purge", summary="Forget dead fires: all, a job's, or the ones named")
def purge(body: PurgeBody | None = Body(default=None),
          client: Client = Depends(operator)) -> dict[str, Any]:
    b = body or PurgeBody()
    return {"purged": client.dead_purge(b.job, fires=b.fires, note=b.note)}


@router.post("/dead/{fire_id:path}/retry", summary="Queue one dead fire again")
def retry(fire_id: str, body: Note | None = Body(default=None),
          client: Client = Depends(operator)) -> dict[str, Any]:
    client.dead_retry(fire_id, note=(body or Note()).note)
    return {"fire": fire_id, "retried": True}


@router.get("/status", summary="Planners, workers, Redis health and warnings")
def status(client: Client = Depends(reader)) -> dict[str, Any]:
    return plain(client.status())  # type: ignore[no-any-return]


@router.get("/malformed", summary="Entries of Redis set aside: not what their key holds")
def malformed(limit: int = Query(50, ge=1, le=MAX_LIMIT),
              client: Client = Depends(reader)) -> Page[dict[str, Any]]:
    aside = client.malformed(limit)
    return Page[dict[str, Any]](items=[plain(e) for e in aside.entries], total=aside.total)


@router.get("/audit", summary="Every change: who, what, when, note (newest first)")
def audit(cursor: str | None = None, limit: int = Query(50, ge=1, le=MAX_LIMIT),
          client: Client = Depends(reader)) -> Page[AuditItem]:
    page = client.audit(limit=limit, cursor=offset(cursor))
    return Page[AuditItem](items=[AuditItem(**plain(a.as_dict())) for a in page.actions],
                cursor=None if page.cursor is None else str(page.cursor))


# -- runtime schedules -------------------------------------------------------------------
@router.get("/schedules", summary="Runtime schedules, a page at a time")
def list_schedules(job: str | None = None, prefix: str | None = None,
                   cursor: str | None = None, limit: int = Query(100, ge=1, le=MAX_LIMIT),
                   client: Client = Depends(reader)) -> Page[dict[str, Any]]:
    page = client.schedules(job=job, prefix=prefix, cursor=cursor or None, limit=limit)
    total = None if prefix else client.count_schedules(job=job)  # a count is kept per job
    return Page[dict[str, Any]](items=[plain(s.as_dict()) for s in page.schedules],
                                cursor=page.cursor,
                total=total, unreadable=page.unreadable)


@router.get("/schedules/{sid:path}", summary="One runtime schedule")
def get_schedule(sid: str, client: Client = Depends(reader)) -> dict[str, Any]:
    return plain(client.get_schedule(sid).as_dict())  # type: ignore[no-any-return]


@router.put("/schedules/{sid:path}", summary="Create or change a runtime schedule")
def put_schedule(sid: str, body: ScheduleBody, response: Response,
                 client: Client = Depends(operator)) -> dict[str, Any]:
    outcome = client.upsert_schedule(sid, job=body.job, **body.fields())
    if outcome == "created":
        response.status_code = 201
    return {"id": sid, "outcome": outcome,
            "schedule": plain(client.get_schedule(sid).as_dict())}


@router.delete("/schedules/{sid:path}", summary="Delete a runtime schedule")
def delete_schedule(sid: str, client: Client = Depends(operator)) -> dict[str, Any]:
    if not client.delete_schedule(sid):
        raise HTTPException(404, f"no schedule {sid!r}")
    return {"id": sid, "deleted": True}


@router.post("/schedules/{sid:path}/pause", summary="Pause a runtime schedule")
def pause_schedule(sid: str, client: Client = Depends(operator)) -> dict[str, Any]:
    return {"id": sid, "outcome": client.pause_schedule(sid)}


@router.post("/schedules/{sid:path}/resume", summary="Resume a runtime schedule")
def resume_schedule(sid: str, client: Client = Depends(operator)) -> dict[str, Any]:
    return {"id": sid, "outcome": client.resume_schedule(sid)}


@router.get("/", include_in_schema=False)
def root(request: Request) -> dict[str, str]:
    return {"docs": "/api/docs", "openapi": "/api/openapi.json"}
