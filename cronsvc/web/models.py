"""The API's request and response bodies (pydantic): the one home of its wire format.

Times go out as ms since the epoch and as ISO 8601 UTC text beside them (``*_ms`` and
``*_at``); they come in as either.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Generic, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from cronsvc.clock import iso_utc


class Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Note(Body):
    """An optional note, kept in the audit log (and, for a pause, on the job)."""

    note: str | None = Field(default=None, max_length=1000)


class ResumeBody(Note):
    catch_up: bool = Field(default=False, description="queue again the fires the pause kept "
                                                      "from running, as the job's catch_up says")


class TriggerBody(Note):
    payload: Any = Field(default=None, description="any JSON value; the run gets it as "
                                                   "CRONSVC_PAYLOAD or ctx.payload")


class AtBody(TriggerBody):
    when: str | int = Field(description="ISO 8601 time with a zone, or ms since the epoch")


class FiresBody(Note):
    fires: list[str] = Field(min_length=1, max_length=1000)


class PurgeBody(Note):
    job: str | None = None
    fires: list[str] | None = Field(default=None, max_length=1000)


class ScheduleBody(Body):
    """A runtime schedule: exactly one of ``cron`` or ``every``."""

    job: str
    cron: str | None = None
    every: str | int | None = Field(default=None, description="'90m', or seconds")
    anchor: str | int | None = None
    timezone: str = "UTC"
    start: str | int | None = None
    end: str | int | None = None
    max_runs: int | None = None
    payload: Any = None
    paused: bool = False
    catch_up: str | None = None
    starting_deadline: str | int | None = None
    jitter: str | int | None = None
    overlap: str | None = None
    skip: dict[str, Any] | list[dict[str, Any]] | None = Field(
        default=None, description="{holidays: 'DE-BY', dates: ['2026-12-24']}, or a list")
    business_days: bool = False
    only: str | None = Field(default=None, description="first_business_day or "
                                                       "last_business_day")

    def fields(self) -> dict[str, Any]:
        """The Client's keyword arguments: what was given."""
        return {k: v for k, v in self.model_dump(exclude={"job"}).items()
                if v is not None and not (k in ("paused", "business_days") and v is False)}


Item = TypeVar("Item")


class Page(BaseModel, Generic[Item]):
    """One page of a list: pass ``cursor`` back for the next (null: the last page); each
    route says what its items are (``Page[JobItem]``...)."""

    items: list[Item]
    cursor: str | None = None
    total: int | None = Field(default=None, description="how many match the filters, on "
                                                        "every page; null: not counted")
    # entries of Redis left out because they are not what their key holds, each named
    unreadable: list[str] = []


class JobItem(BaseModel):
    """A job in a list: ``/api/v1/jobs``."""

    name: str
    cron: str = Field(description="the schedule as the job file writes it: a cron "
                                  "expression, 'every 90m', or '' (run by trigger only)")
    schedule_words: str = Field(description="the schedule in words: 'at 03:00 every day'")
    description: str = Field(description="the job's description, from the job file ('' "
                                         "without one)")
    summary: str = Field(deprecated=True, description="the job's description under its "
                                                      "old name: read description (summary "
                                                      "goes in the next release)")
    timezone: str
    jitter: float
    catch_up: str
    overlap: str = Field(description="with its bounds: 'queue, max 3, limit db 2'")
    max_attempts: int
    pool: str
    then: str = Field(description="the jobs its fires' ends trigger: 's=import;f=alert'")
    status: Literal["ok", "failed", "paused", "never"]
    tags: list[str]
    paused: bool
    pause_note: str | None
    paused_since_ms: int | None
    paused_since_at: str | None = None
    paused_in_file: bool
    next_fire_ms: int | None
    next_fire_at: str | None = None
    last_run: dict[str, Any] | None = Field(description="its newest history record")
    starting_deadline_ms: int
    recent: list[str] = Field(description="statuses of its newest history records, newest "
                                          "first")


class FireTime(BaseModel):
    at_ms: int
    at: str


class JobDetail(JobItem):
    """One job: ``/api/v1/jobs/{name}``."""

    definition: dict[str, Any] | None = Field(description="what a worker runs, from the "
                                                          "web server's job file")
    next: list[FireTime]


class DeadItem(BaseModel):
    """A dead fire: ``/api/v1/dead``."""

    fire: str
    job: str
    kind: str
    due_ms: int
    due_at: str | None = None
    died_ms: int
    died_at: str | None = None
    attempts: int
    payload: Any = None
    last: dict[str, Any] | None = Field(description="its newest history record")


class AuditItem(BaseModel):
    """One change: ``/api/v1/audit``."""

    at_ms: int
    at: str | None = None
    actor: str = Field(description="cli:<os user>, client:<os user>, web:<token name>, "
                                   "auto, or the actor a caller named")
    action: str
    target: str
    note: str | None
    detail: dict[str, Any]


def plain(value: Any) -> Any:
    """A Client view (dataclasses, nested) as JSON-ready data, with an ISO UTC text beside
    every ``*_ms`` time."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        value = {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for k, v in value.items():
            out[str(k)] = plain(v)
            if isinstance(k, str) and k.endswith("_ms") and isinstance(v, int) and v > 10**11:
                text = "at" if k == "at_ms" else k[:-3] + "_at"
                if text not in value:
                    out[text] = iso_utc(v)
        return out
    if isinstance(value, list | tuple | set):
        return [plain(v) for v in value]
    return value
