"""Text the operator commands print: aligned tables, times local and relative, JSON.

Pure: every function takes the ``now_ms`` it renders against (the Redis clock
the view was read at), so nothing here reads the time.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Collection, Mapping, Sequence
from datetime import datetime
from typing import Any

from cronsvc.cli.term import printable
from cronsvc.client.backfill import Backfill, BackfillFire
from cronsvc.client.costs import KeysCost
from cronsvc.client.views import (
    Aside,
    DeadFire,
    FireView,
    InFlight,
    JobInfo,
    JobQueue,
    Member,
    Pause,
    QueuedFire,
    QueueView,
    Status,
)
from cronsvc.history import in_order
from cronsvc.keys import DEFAULT_POOL
from cronsvc.malformed import shown
from cronsvc.policy import chain_targets
from cronsvc.schedule.expand import next_fires, zone
from cronsvc.schedule.runtime import RuntimeSchedule
from cronsvc.schedule.words import describe_schedule, schedule_text
from cronsvc.sizes import format_size

NONE = "-"
Zones = Mapping[str, str]  # job -> time zone


def as_json(value: Any) -> str:
    """Any view (or list of views) as indented JSON; times stay ms since the epoch."""
    return json.dumps(_plain(value), indent=2, default=str)


def _plain(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        plain = {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
        if isinstance(value, QueueView):
            plain["lateness_ms"] = value.lateness_ms
        return plain
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


# -- times --------------------------------------------------------------------------------
def span(ms: int) -> str:
    """A length of time in at most two units: ``850ms``, ``3.2s``, ``4m 5s``, ``2d 3h``."""
    ms = abs(int(ms))
    if ms < 1000:
        return f"{ms}ms"
    if ms < 10_000:
        return f"{ms / 1000:.1f}s"
    s = ms // 1000
    for unit, size, small, small_size in (("d", 86400, "h", 3600), ("h", 3600, "m", 60),
                                          ("m", 60, "s", 1)):
        if s >= size:
            rest = (s % size) // small_size
            return f"{s // size}{unit}" + (f" {rest}{small}" if rest else "")
    return f"{s}s"


def relative(ms: int, now_ms: int) -> str:
    """``in 3m``, ``12s ago`` or ``now`` (within a second)."""
    delta = ms - now_ms
    if abs(delta) < 1000:
        return "now"
    return f"in {span(delta)}" if delta > 0 else f"{span(delta)} ago"


def local(ms: int, tz: str = "UTC") -> str:
    """``2030-01-31 09:00:00 CET``: the wall clock of ``tz``; the raw ms for a time no
    calendar holds (past the year 9999: anyone may write such a fire into Redis)."""
    try:
        t = datetime.fromtimestamp(ms / 1000, zone(tz))
    except (OverflowError, ValueError, OSError):
        return f"{ms} ms"
    return t.strftime("%Y-%m-%d %H:%M:%S ") + (t.tzname() or "")


def when(ms: int | None, now_ms: int, tz: str = "UTC") -> str:
    """Local time and relative: ``2030-01-31 09:00:00 CET (in 3m)``."""
    if ms is None:
        return NONE
    return f"{local(ms, tz)} ({relative(ms, now_ms)})"


# -- tables -------------------------------------------------------------------------------
def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """Columns padded to their widest cell, two spaces apart; no trailing blanks."""
    cells = [[str(h) for h in headers]] + [[_cell(c) for c in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
                     for row in cells)


def _cell(value: Any) -> str:
    """A value as a table shows it: on one line, its control characters shown (a cell is
    measured by its length, and a newline in it would start a row of its own)."""
    return NONE if value in (None, "") else printable(str(value), cell=True)


def _short(text: Any, most: int = 60) -> str:
    line = " ".join(str(text).split())
    return line if len(line) <= most else line[:most - 1] + "…"


#: ``cronsvc ls`` cuts its free text (description, pause) to fit this many columns.
LS_WIDTH = 120


def jobs(found: Sequence[JobInfo], now_ms: int, width: int = LS_WIDTH, *,
         about: Mapping[str, str] | None = None, at: Mapping[str, str] | None = None,
         wide: bool = False) -> str:
    """``cronsvc ls``: one row a job, cut to ``width`` columns where the words allow
    (``wide``: every column, nothing cut). ``about``: each job's description from the
    job file; ``at``: where each job is written (``schedules.yaml:14``, or
    ``proj/jobs.py:12`` for a job declared in Python), a column if given.

    The next fire is relative: its wall time follows from the schedule in words and
    the zone beside it (``--json`` and ``cronsvc next`` give the instants); how long
    the last run took is in ``cronsvc history``.
    """
    if not found:
        return "no job is published (is a planner running?)"
    about, at = about or {}, at or {}
    if wide:
        headers = ("JOB", "CRON", "SCHEDULE", "ZONE", "NEXT FIRE", "CATCH UP", "OVERLAP",
                   "POOL", "ATTEMPTS", "THEN", "LAST RUN", "PAUSED", "DESCRIPTION",
                   "DECLARED AT")
        return table(headers, [
            [j.name, j.cron or NONE, j.description or NONE, j.timezone, _next(j, now_ms),
             catch_up(j), j.overlap, j.pool, j.max_attempts, then_words(j.then) or NONE,
             last_run(j.last_run, now_ms), paused(j, now_ms), about.get(j.name) or NONE,
             at.get(j.name) or NONE]
            for j in found])
    narrow = ["JOB", "SCHEDULE", "ZONE", "NEXT FIRE", "CATCH UP", "LAST RUN", "PAUSED",
              "DESCRIPTION"]
    rows = [[j.name, j.description or j.cron or NONE, j.timezone, _next(j, now_ms),
             catch_up(j), last_run(j.last_run, now_ms, took=False), paused(j, now_ms),
             about.get(j.name) or NONE] for j in found]
    elastic = {1: 16, 5: 12, 6: 8, 7: 11}
    if any(j.pool != DEFAULT_POOL for j in found):  # a fleet with pools: whose workers run it
        narrow.insert(3, "POOL")
        for row, j in zip(rows, found, strict=True):
            row.insert(3, j.pool)
        elastic = {1: 16, 6: 12, 7: 8, 8: 11}
    if at:  # where each job is, in full (a path cut short says nothing)
        narrow.append("DECLARED AT")
        for row, j in zip(rows, found, strict=True):
            row.append(at.get(j.name) or NONE)
    return table(narrow, _fit(narrow, rows, width, elastic))


def _fit(headers: Sequence[str], rows: list[list[str]], width: int,
         elastic: Mapping[int, int]) -> list[list[str]]:
    """``rows`` with the text of the ``elastic`` columns (index -> narrowest width) cut,
    widest first, until the table is ``width`` wide or they are all at their narrowest."""
    rows = [[_cell(c) for c in row] for row in rows]  # measured as the table shows them
    widths = [max(len(c) for c in col) for col in zip(headers, *rows, strict=True)]
    over = sum(widths) + 2 * (len(widths) - 1) - width
    while over > 0:
        i = max(elastic, key=lambda k: widths[k] - elastic[k])
        cut = min(over, widths[i] - elastic[i])
        if cut <= 0:
            break
        widths[i] -= cut
        over -= cut
    return [[_short(c, widths[i]) if i in elastic else c for i, c in enumerate(row)]
            for row in rows]


def _next(job: JobInfo, now_ms: int) -> str:
    if job.next_fire_ms is not None:
        return relative(job.next_fire_ms, now_ms)
    # No fire within expand.NEXT_FIRE_YEARS (or past its end), or no schedule at all.
    return "never" if job.cron else "on demand"


def catch_up(job: JobInfo) -> str:
    """``latest``, or with the starting deadline that applies: ``none (1m)``, ``all (2h)``."""
    if not job.starting_deadline_ms:
        return job.catch_up
    return f"{job.catch_up} ({span(job.starting_deadline_ms)})"


def last_run(record: Mapping[str, Any] | None, now_ms: int, took: bool = True) -> str:
    """``ok 3m ago (took 1.2s)`` (without ``took``: ``ok 3m ago``), or a skip:
    ``skipped 5s ago (paused)``."""
    if not record:
        return NONE
    status = record.get("status", "?")
    started = record.get("started")
    if started is not None:
        duration = record.get("duration_ms")
        return f"{status} {relative(started, now_ms)}" + (
            f" (took {span(duration)})" if took and duration is not None else "")
    reason = record.get("reason")
    at = relative(record["scheduled"], now_ms) if record.get("scheduled") else ""
    return " ".join(p for p in (status, at, f"({reason})" if reason else "") if p)


def paused(job: JobInfo, now_ms: int) -> str:
    if not job.paused:
        return "no"
    parts = []
    if job.paused_since_ms is not None:
        parts.append(f"since {relative(job.paused_since_ms, now_ms)}")
    if job.pause_note:
        parts.append(_short(job.pause_note, 40))
    if job.paused_in_file:
        parts.append("in the job file")
    return "yes: " + ", ".join(parts) if parts else "yes"


def history(records: Sequence[Mapping[str, Any]], now_ms: int, tz: str = "UTC") -> str:
    """``cronsvc history``: newest scheduled time first, the attempts of a fire together
    (first attempt first, the fire named once)."""
    if not records:
        return "no history yet"
    rows = []
    for attempts in by_fire(records):
        for n, r in enumerate(attempts):
            started, scheduled = r.get("started"), r.get("scheduled")
            lag = f"{'+' if started >= scheduled else '-'}{span(started - scheduled)}" if (
                started is not None and scheduled is not None) else None
            note = r.get("reason") or (f"exit {r['exit_code']}" if r.get("exit_code")
                                       else None)
            took = r.get("duration_ms")
            rows.append((r.get("fire") if n == 0 else "  ↳", r.get("status"),
                         when(scheduled, now_ms, tz) if n == 0 else "", lag,
                         span(took) if took is not None else None, r.get("attempt"),
                         r.get("worker"), _short(note) if note else None))
    return table(("FIRE", "STATUS", "SCHEDULED", "START LAG", "TOOK", "ATTEMPT", "WORKER",
                  "NOTE"), rows)


def by_fire(records: Sequence[Mapping[str, Any]]) -> list[list[dict[str, Any]]]:
    """History records grouped by fire: newest scheduled time first, each fire's attempts
    in the order they were made."""
    groups: dict[Any, list[Mapping[str, Any]]] = {}
    for r in records:
        groups.setdefault(r.get("fire") or id(r), []).append(r)
    ordered = sorted(groups.values(),
                     key=lambda g: max(r.get("scheduled") or r.get("at") or 0 for r in g),
                     reverse=True)
    return [in_order(g) for g in ordered]


def fire(view: FireView, now_ms: int, tz: str = "UTC", quiet: Collection[int] = ()) -> str:
    """``cronsvc show``: the fire, where it is, then each attempt with its output (but
    that of the attempts in ``quiet``, shown already)."""
    head = [f"{view.fire}: {view.kind} fire of {view.job}, due {when(view.due_ms, now_ms, tz)}",
            f"now: {view.state}" + (f" on {view.worker}, lease until "
                                    f"{when(view.lease_until_ms, now_ms, tz)}"
                                    if view.state == "running" and view.lease_until_ms else "")]
    if not view.attempts:
        return "\n".join([*head, "no attempt recorded (yet)"])
    out = head
    for r in view.attempts:
        took = r.get("duration_ms")
        parts = [f"attempt {r.get('attempt') or '?'}: {r.get('status')}",
                 f"on {r['worker']}" if r.get("worker") else "",
                 f"started {when(r['started'], now_ms, tz)}" if r.get("started") else "",
                 f"took {span(took)}" if took is not None else "",
                 f"exit {r['exit_code']}" if r.get("exit_code") is not None else "",
                 f"({r['reason']})" if r.get("reason") else ""]
        out.append("  " + " ".join(p for p in parts if p))
        if r.get("output") and r.get("attempt") not in quiet:
            out += ["    " + line for line in str(r["output"]).splitlines()]
    return "\n".join(out)


def queue_by_job(rows: Sequence[JobQueue], cut: bool, now_ms: int) -> str:
    """``cronsvc queue --by-job``: one line a job."""
    if not rows:
        return "the queue is empty"
    out = table(("JOB", "DUE NOW", "AHEAD", "IN FLIGHT", "DEAD", "OLDEST DUE WAITING"),
                [(q.job, q.due, q.ahead, q.in_flight, q.dead,
                  span(now_ms - q.oldest_due_ms) if q.oldest_due_ms is not None else None)
                 for q in rows])
    return out + ("\n(counted from the first fires of each shard's queue only)" if cut else "")


def queue(view: QueueView, zones: Zones) -> str:
    """``cronsvc queue``: due now, planned ahead, in flight."""
    now = view.now_ms
    late = f", oldest waiting {span(view.lateness_ms)}" if view.due_count else ""
    out = [f"due now: {view.due_count}{late}"]
    if view.due:
        out.append(_indent(_queued(view.due, now, zones, "WAITING")))
    out.append(f"planned ahead: {view.ahead_count}" + (
        f" (first {len(view.ahead)})" if view.ahead_count > len(view.ahead) else ""))
    if view.ahead:
        out.append(_indent(_queued(view.ahead, now, zones, "")))
    out.append(f"in flight: {len(view.in_flight)}")
    if view.in_flight:
        out.append(_indent(_in_flight(view.in_flight, now, zones)))
    return "\n".join(out)


def _queued(fires: Sequence[QueuedFire], now_ms: int, zones: Zones, waiting: str) -> str:
    pools = any(q.pool != DEFAULT_POOL or not q.served for q in fires)
    rows = []
    for q in fires:
        row = [q.fire, q.kind, when(q.at_ms, now_ms, zones.get(q.job, "UTC")),
               q.attempts or None]
        if waiting:
            row.insert(3, span(now_ms - q.at_ms))
        if pools:
            row.append(q.pool if q.served else f"{q.pool} (no live worker serves it)")
        rows.append(row)
    headers = ["FIRE", "KIND", "DUE", "ATTEMPTS"]
    if waiting:
        headers.insert(3, waiting)
    if pools:
        headers.append("POOL")
    return table(headers, rows)


def _in_flight(fires: Sequence[InFlight], now_ms: int, zones: Zones) -> str:
    rows = [(f.fire, f.worker, f.attempt,
             relative(f.claimed_at_ms, now_ms) if f.claimed_at_ms is not None else None,
             when(f.lease_until_ms, now_ms, zones.get(f.job, "UTC"))) for f in fires]
    return table(("FIRE", "WORKER", "ATTEMPT", "CLAIMED", "LEASE ENDS"), rows)


def _indent(text: str) -> str:
    return "\n".join("  " + line for line in text.splitlines())


def dead(fires: Sequence[DeadFire], now_ms: int, zones: Zones) -> str:
    """``cronsvc dead``: most recently dead first, with the last known reason."""
    if not fires:
        return "no dead fires"
    rows = []
    for d in fires:
        last = d.last or {}
        why = last.get("reason") or (f"exit {last['exit_code']}" if last.get("exit_code")
                                     else last.get("status"))
        rows.append((d.fire, d.kind, when(d.due_ms, now_ms, zones.get(d.job, "UTC")),
                     relative(d.died_ms, now_ms), d.attempts, _short(why) if why else None))
    return table(("FIRE", "KIND", "SCHEDULED", "DIED", "ATTEMPTS", "LAST ERROR"), rows)


def malformed(aside: Aside, now_ms: int) -> str:
    """``cronsvc malformed``: the entries of Redis set aside, newest first."""
    if not aside.total:
        return "nothing set aside: every entry read back was what its key holds"
    rows = [(relative(e.at_ms, now_ms), e.key, shown(e.member), e.why) for e in aside.entries]
    more = aside.total - len(aside.entries)
    return table(("SET ASIDE", "KEY", "ENTRY", "WHY"), rows) + (
        f"\n... and {more} more (-n to list them)" if more > 0 else "")


def runs_memory(m: Mapping[str, KeysCost]) -> str:
    """``record of runs: history 4.5 KiB (4 jobs), outputs 3.3 KiB (7 fires), live
    output 0 B (0 fires)``."""
    def cost(what: str, c: KeysCost, unit: str) -> str:
        floor = "" if c.counted_all else "at least "
        return (f"{what} {floor}{format_size(c.bytes)} ({c.keys:,} {unit}"
                f"{'' if c.keys == 1 else 's'})")

    return "record of runs: " + ", ".join((
        cost("history", m["history"], "job"), cost("outputs", m["outputs"], "fire"),
        cost("live output", m["live"], "fire")))


def status(s: Status) -> str:
    """``cronsvc status`` (warnings are printed apart, on stderr)."""
    aof = {True: "on", False: "off", None: "unknown"}[s.aof]
    out = [f"redis {s.redis_version or 'unknown'}, AOF {aof}, "
           f"maxmemory-policy {s.maxmemory_policy or 'unknown'}, memory {memory(s)}"]
    if s.generation:
        g = s.generation
        out.append(f"job file: generation {g.get('gen')}, {g.get('jobs')} jobs, published by "
                   f"{g.get('planner')} {relative(int(g.get('at') or 0), s.now_ms)}")
    if s.schedules:
        out.append(f"runtime schedules: {s.schedules:,}")
    if s.runs:
        out.append(runs_memory(s.runs))
    out.append(f"planners: {sum(p.alive for p in s.planners)} live")
    if s.planners:
        out.append(_indent(table(("PLANNER", "LAST HEARTBEAT", "STATE", "JOBS", "FILE",
                                  "PLANNED TO", "REDIS ERROR"), [
            (p.id, relative(p.last_seen_ms, s.now_ms), _state(p), p.info.get("jobs"),
             _planner_file(p), when(p.info.get("planned_to") or None, s.now_ms),
             _last_error(p, s.now_ms)) for p in s.planners])))
    out.append(f"workers: {sum(w.alive for w in s.workers)} live")
    if s.workers:
        out.append(_indent(table(("WORKER", "LAST HEARTBEAT", "STATE", "BUSY", "PID", "FILE",
                                  "REDIS ERROR"), [
            (w.id, relative(w.last_seen_ms, s.now_ms), _state(w),
             f"{w.info.get('busy', '?')}/{w.info.get('slots', '?')}", _pid(w),
             "differs" if w.id in s.worker_gaps else ("same" if w.alive else NONE),
             _last_error(w, s.now_ms)) for w in s.workers])))
    if s.unrunnable:
        out.append(f"jobs no live worker can run: {', '.join(s.unrunnable)}")
    if any(p.name != DEFAULT_POOL for p in s.pools):
        out.append("pools:")
        out.append(_indent(table(("POOL", "JOBS", "LIVE WORKERS", "DUE NOW", "OLDEST DUE"), [
            (p.name, p.jobs, p.workers if p.workers else "0 (no live worker serves it)",
             p.due, span(s.now_ms - p.oldest_due_ms) if p.oldest_due_ms is not None else None)
            for p in s.pools])))
    n = s.notifications
    if n and (n.get("outbox") or n.get("queued") or n.get("undelivered")):
        out.append(f"notifications: {n.get('outbox', 0)} to route, {n.get('queued', 0)} "
                   f"being sent, {len(n.get('undelivered') or [])} given up on")
        if n.get("undelivered"):
            out.append(_indent(table(("CHANNEL", "EVENT", "JOB", "ATTEMPTS", "LAST TRY",
                                      "ERROR"), [
                (u.get("channel"), u.get("event"), u.get("job") or "(fleet)", u.get("attempts"),
                 relative(int(u.get("last_ms") or 0), s.now_ms), u.get("error"))
                for u in n["undelivered"][:20]])))
    return "\n".join(out)


def _pid(w: Member) -> object:
    """A worker's pid; with the number of its processes when it runs several."""
    n = w.info.get("processes")
    return f"{w.info.get('pid')} ({n} processes)" if isinstance(n, int) and n > 1 else \
        w.info.get("pid")


def then_words(then: str) -> str:
    """``s=import;f=alert`` as ``ok: import; failed: alert``."""
    names = {"s": "ok", "f": "failed"}
    return "; ".join(f"{names.get(kind, kind)}: {', '.join(jobs)}"
                     for kind, jobs in chain_targets(then).items())


def memory(s: Status) -> str:
    """``12.5 MiB of 1.0 GiB (1%)``, ``12.5 MiB (no maxmemory)``, or ``unknown``."""
    if s.used_memory is None:
        return "unknown"
    if not s.maxmemory:
        return f"{format_size(s.used_memory)} (no maxmemory)"
    return (f"{format_size(s.used_memory)} of {format_size(s.maxmemory)} "
            f"({100 * s.used_memory // s.maxmemory}%)")


def _planner_file(p: Member) -> str:
    """``gen 3``, ``gen 3 (yields)``: the job file a planner holds, as it decided last."""
    gen, verdict = p.info.get("generation"), p.info.get("verdict")
    if verdict == "yield":
        return "older (yields)"
    return f"gen {gen}" if gen is not None else NONE


def _last_error(m: Member, now_ms: int) -> str:
    err = m.info.get("last_error")
    if not isinstance(err, dict):
        return NONE
    return f"{err.get('code')} {relative(int(err.get('at') or 0), now_ms)}"


def _state(m: Member) -> str:
    return "live" if m.alive else "gone (no heartbeat)"


def pause(p: Pause, now_ms: int, tz: str = "UTC") -> str:
    """What ``cronsvc pause`` did, and what still runs."""
    out = [f"paused {p.job} since {when(p.since_ms, now_ms, tz)}"]
    if p.in_flight:
        verb = "ended" if p.waited else "still running (not stopped)"
        out.append(f"{len(p.in_flight)} run(s) claimed before the pause {verb}:")
        out.append(_indent(_in_flight(p.in_flight, now_ms, {p.job: tz})))
    return "\n".join(out)


def schedules(found: Sequence[RuntimeSchedule], now_ms: int, cursor: str | None) -> str:
    """``cronsvc schedule ls``: one row a schedule, then how to get the next page."""
    if not found and cursor is None:
        return "no runtime schedule"
    rows = []
    for s in found:
        upcoming = [] if s.paused else next_fires(s.spec, now_ms, 1)
        rows.append([s.id, s.job, schedule_text(s.spec), s.timezone,
                     relative(upcoming[0], now_ms) if upcoming else ("paused" if s.paused
                                                                      else "never"),
                     relative(s.updated_ms, now_ms) + (f" by {s.actor}" if s.actor else "")])
    out = table(("SCHEDULE ID", "JOB", "WHEN", "ZONE", "NEXT FIRE", "CHANGED"), rows)
    if cursor is not None:
        out += f"\nmore: --cursor {cursor}"
    return out


def schedule(s: RuntimeSchedule, now_ms: int, count: int = 5) -> str:
    """``cronsvc schedule show``: every field, and the next fires."""
    upcoming = [] if s.paused else next_fires(s.spec, now_ms, count)
    lines = [
        f"id:        {s.id}", f"job:       {s.job}",
        f"when:      {describe_schedule(s.spec)} ({s.timezone})",
        f"payload:   {json.dumps(s.payload) if s.payload is not None else NONE}",
        f"paused:    {'yes' if s.paused else 'no'}",
        f"policy:    catch_up {s.catch_up or 'of the job'}, starting_deadline "
        f"{span(s.starting_deadline_ms) if s.starting_deadline_ms else 'of the job'}, "
        f"overlap {s.overlap or 'of the job'}",
        f"changed:   {local(s.updated_ms)} by {s.actor or NONE} (rev {s.rev}; created "
        f"{local(s.created_ms)})",
        "next:      " + (", ".join(local(ms, s.timezone) for ms in upcoming) if upcoming
                         else ("none while paused" if s.paused else "none")),
    ]
    return "\n".join(lines)


# -- backfill -------------------------------------------------------------------------------
_LEFT_ALONE = ("ran", "queued already", "in flight", "dead")


def backfill_plan(plan: Backfill) -> str:
    """``cronsvc backfill``: the range and what the backfill does with its fires; in a dry
    run, each fire with ``would run`` or why it is left alone."""
    tz, dry_run = plan.timezone, plan.dry_run
    what = "would run" if dry_run else "to run"
    counts = [f"{len(plan.to_run)} {what}"] + [
        f"{plan.count(s)} {s}" for s in _LEFT_ALONE if plan.count(s)]
    head = (f"backfill {plan.target} from {local(plan.from_ms, tz)} to {local(plan.to_ms, tz)}"
            f"{' (dry run)' if dry_run else ''}: {_fires(len(plan.fires))}, "
            + ", ".join(counts))
    if not dry_run or not plan.fires:
        return head
    return head + "\n" + "\n".join(backfill_fire(f, tz, what) for f in plan.fires)


def _fires(n: int) -> str:
    return f"{n} fire" if n == 1 else f"{n} fires"


def backfill_fire(fire: BackfillFire, tz: str, to_run: str = "to run") -> str:
    """One fire of a backfill: its id, due time and state (``ran``, ``would run``, ...)."""
    state = to_run if fire.state == "to run" else fire.state
    if fire.state != "to run" and not fire.queued:
        state += ", left alone"
    return f"  {fire.fire}  {local(fire.due_ms, tz)}  {state}"


def backfill_done(done: Backfill) -> str:
    """The last line of a backfill that ran."""
    ran = [f for f in done.fires if f.queued]
    outcome = ", ".join(f"{sum(1 for f in ran if f.state == s)} {s}"
                        for s in ("ran", "dead", "not run") if any(f.state == s for f in ran))
    return f"backfilled {done.target}: {_fires(len(ran))} queued: {outcome or 'none ended'}"
