"""The API's request and response bodies (pydantic): the one home of its wire format.

Times go out as ms since the epoch and as ISO 8601 UTC text beside them (``*_ms`` and
``*_at``); they come in as either.
"""

from __future__ import annotations

import dataclasses
from typing import Any

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


class Page(BaseModel):
    """One page of a list: pass ``cursor`` back for the next (null: the last page)."""

    items: list[dict[str, Any]]
    cursor: str | None = None
    total: int | None = None
    # entries of Redis left out because they are not what their key holds, each named
    unreadable: list[str] = []


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
