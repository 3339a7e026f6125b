"""The dashboard and the HTTP API with a big fleet: server time of the jobs page and of
``GET /api/v1/jobs`` with 10,000 jobs and 1,000,000 runtime schedules.

- The fleet: ``jobs`` jobs published (daily crons at random minutes), each with 20
  history records, and ``schedules`` runtime schedules of one job, written as their
  stored lines (how they got there does not matter to a read).
- A real ``cronsvc web`` process; sequential requests over loopback, timed by the
  client: the first page, pages further on, a name search, and the API's pages through
  their cursor. p50 and p99 of ``requests`` each.
- Reference: ``GET /healthz`` of the same server in the same run (the HTTP floor).

Run: ``.venv/bin/python -m bench.web [--jobs 10000] [--schedules 1000000]``
"""

from __future__ import annotations

import argparse
import json
import random
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import yaml

from bench import common
from bench.common import Figure, K, Section
from cronsvc.client.client import Client
from cronsvc.keys import Keys
from cronsvc.schedule.runtime import build
from cronsvc.testing import WebServer

REQUESTS = 200
TARGET_MS = 100.0


def job_file(tmp: Path, n: int, seed: int = 11) -> Path:
    rnd = random.Random(seed)
    jobs = {f"job-{i:05d}": {"cron": f"{rnd.randrange(60)} {rnd.randrange(24)} * * *",
                             "call": "bench.jobs:noop", "tags": [f"team-{i % 20}"]}
            for i in range(n)}
    path = tmp / "schedules.yaml"
    path.write_text(yaml.safe_dump({"jobs": jobs}, sort_keys=False))
    return path


def fill(r: object, client: Client, jobs: int, schedules: int) -> None:
    """History for every job, and ``schedules`` runtime schedules of job-00000."""
    now = client.server_ms()
    pipe = r.pipeline(transaction=False)  # type: ignore[attr-defined]
    for i in range(jobs):
        name = f"job-{i:05d}"
        for k in range(20):
            due = now - (k + 1) * 86_400_000
            pipe.lpush(K.history(name), json.dumps({
                "fire": f"{name}@{due}", "job": name, "status": "ok" if k % 7 else "failed",
                "reason": None, "scheduled": due, "started": due + 3, "duration_ms": 40 + k,
                "attempt": 1, "worker": "w-1", "exit_code": None, "output": None}))
        if i % 500 == 0:
            pipe.execute()
    pipe.execute()
    line = build("x", job="job-00000", now_ms=now, cron="0 9 * * *",
                 timezone="Europe/Berlin", payload={"user": 1}).stored()
    keys = Keys()
    for start in range(0, schedules, 10_000):
        pipe.hset(keys.schedules, mapping={f"user:{j}": line
                                           for j in range(start, min(start + 10_000, schedules))})
        pipe.execute()
    r.hset(keys.schedule_counts, "job-00000", schedules)  # type: ignore[attr-defined]


def timed(http: httpx.Client, paths: Callable[[int], str], n: int,
          seen: Callable[[httpx.Response], None] | None = None) -> tuple[float, float]:
    """p50 and p99 (ms) of ``n`` sequential GETs of ``paths(i)``; ``seen`` is given each
    reply, after its time is taken."""
    took = []
    for i in range(n):
        path = paths(i)
        t0 = time.perf_counter()
        reply = http.get(path)
        took.append((time.perf_counter() - t0) * 1000)
        if reply.status_code != 200:
            raise RuntimeError(f"GET {path}: {reply.status_code} {reply.text[:200]}")
        if seen is not None:
            seen(reply)
    ordered = sorted(took)
    return common.percentile(ordered, 0.5), common.percentile(ordered, 0.99)


def measure(jobs: int = 10_000, schedules: int = 1_000_000, requests: int = REQUESTS) -> Section:
    section = Section("Dashboard and API")
    with common.redis_server() as (server, r), tempfile.TemporaryDirectory() as tmp:
        path = job_file(Path(tmp), jobs)
        client = Client(server.url, config=str(path))
        client.publish_config()
        fill(r, client, jobs, schedules)
        pages = max(jobs // 50, 1)
        with WebServer(Path(tmp), server.url, path) as web, \
                httpx.Client(base_url=web.url, timeout=60,
                             headers={"Accept": "text/html"}) as http:
            floor = timed(http, lambda i: "/healthz", requests)
            ref = f"GET /healthz p50 {floor[0]:.1f} ms, p99 {floor[1]:.1f} ms"
            cursors: list[str | None] = [None]  # each API page names the next

            def api(i: int) -> str:
                cursor = cursors[-1]
                return "/api/v1/jobs?limit=50" + (f"&cursor={cursor}" if cursor else "")

            def next_page(reply: httpx.Response) -> None:
                cursors.append(reply.json().get("cursor"))

            checks: list[tuple[str, Callable[[int], str],
                               Callable[[httpx.Response], None] | None]] = [
                ("jobs page (first)", lambda i: "/jobs", None),
                ("jobs page (a page further on)", lambda i: f"/jobs?cursor={i * 37 % pages * 50}",
                 None),
                ("jobs page (name search)", lambda i: f"/jobs?q=job-0{i % 10}", None),
                ("GET /api/v1/jobs (pages by cursor)", api, next_page),
                ("job page with 1,000,000 schedules", lambda i: "/jobs/job-00000", None),
            ]
            for name, paths, seen in checks:
                p50, p99 = timed(http, paths, requests, seen)
                target = "job page" not in name
                section.figures.append(Figure(
                    f"{name}, {jobs:,} jobs", f"p50 {p50:.1f} ms, p99 {p99:.1f} ms",
                    f"p99 < {TARGET_MS:.0f} ms" if target else "-", ref,
                    met=p99 < TARGET_MS if target else None))
    section.notes.append(f"{requests} sequential requests each over loopback, timed by the "
                         "client; one cronsvc web process (uvicorn, one worker)")
    return section


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=10_000)
    ap.add_argument("--schedules", type=int, default=1_000_000)
    ap.add_argument("--requests", type=int, default=REQUESTS)
    opts = ap.parse_args()
    measure(opts.jobs, opts.schedules, opts.requests).print()


if __name__ == "__main__":
    main()
