"""The Client hands each call on to one of its parts (cronsvc/client/core.py and the
modules beside it): what a caller sees of a method, its signature and docstring, is
the part's, so the two cannot drift apart. Pure, no Redis."""

from __future__ import annotations

import inspect

from cronsvc.client.audit import AuditLog
from cronsvc.client.backfill import BackfillOps
from cronsvc.client.client import Client
from cronsvc.client.core import Core
from cronsvc.client.fleet import FleetReader
from cronsvc.client.jobs import JobOps
from cronsvc.client.schedules import ScheduleOps

PARTS = (Core, FleetReader, JobOps, ScheduleOps, BackfillOps, AuditLog)
OWN = {"acting_as", "publish_config"}  # the Client's own: made of its parts, no part's
# Everything the Client offers: a change here is a change of the public API.
METHODS = OWN | {
    "keys", "keys_of_fire", "pools_of", "server_ms", "published_jobs", "require_job",
    "audited", "pools", "served_pools", "pool_views", "histories", "jobs", "jobs_named",
    "job", "next_fires", "upcoming", "history", "zones", "fire_state", "fire",
    "queue_by_job", "queue", "dead", "status", "malformed", "enqueue", "trigger", "cancel",
    "pause", "resume", "dead_retry", "dead_purge", "upsert_schedule", "upsert_schedules",
    "delete_schedule", "pause_schedule", "resume_schedule", "get_schedule", "schedules",
    "count_schedules", "backfill", "audit", "live_output",
}
ATTRIBUTES = {"redis", "scripts", "shards", "prefix", "actor"}


def test_the_public_api_is_what_it_was() -> None:
    public = {n: v for n, v in vars(Client).items() if not n.startswith("_")}
    assert {n for n, v in public.items() if inspect.isfunction(v)} == METHODS
    assert {n for n, v in public.items() if isinstance(v, property)} == ATTRIBUTES


def test_each_method_is_one_parts_with_its_signature_and_docstring() -> None:
    for name in sorted(METHODS - OWN):
        [part] = [p for p in PARTS if name in vars(p)]
        ours, theirs = getattr(Client, name), getattr(part, name)
        assert inspect.signature(ours) == inspect.signature(theirs), name
        assert inspect.getdoc(ours) == inspect.getdoc(theirs), name
