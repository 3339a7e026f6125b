"""The policy line: how a job's fires are judged at claim time, as Redis holds it.

The claim script cannot read the job file, so the planner publishes, per job,
one line the script parses with a single pattern match::

    digest|catch_up|deadline_ms|overlap|max_attempts|paused|definition|notify|pause_after|
    max_concurrent|limits|pool|then

- ``digest``: 12 hex chars of the schedule (cron, zone, jitter); a new digest
  means new fire times, so the old fires are unqueued and planning restarts.
- ``catch_up``: ``all``, ``latest`` or ``none``.
- ``deadline_ms``: the starting deadline (0: none). ``catch_up: none`` without
  one gets :data:`NONE_DEADLINE_S`.
- ``overlap``: ``allow``, ``forbid`` or ``replace``.
- ``max_attempts``: the first run plus the retries.
- ``paused``: ``1`` when the job file pauses the job, else ``0``.
- ``definition``: 12 hex chars of what runs (command, call or http, env, timeout,
  retries...). A worker takes a fire only if it holds this very definition.
- ``notify``: the events the job's channels want, as ``,dead,missed,recovered,`` (empty
  when the job notifies no channel): what the scripts push into the outbox.
- ``pause_after``: the job is paused after this many fires failed in a row (empty: never).
- ``max_concurrent``: runs of the job (of a runtime schedule: of the schedule) at once,
  fleet-wide (empty: no bound but ``overlap``'s).
- ``limits``: the named limits the job's tags join, ``db:3,gpu:1`` (empty: none).
- ``pool``: the pool whose queue holds the job's fires (empty: ``default``).
- ``then``: the jobs a fire's end triggers, ``s=import,report;f=alert`` (on success; on
  failure for good); empty: none.

:class:`Policy` is the only writer and reader of the line in Python. Its twin in Lua is
``lua/includes/policy.lua``, the one reader there (the claim judges fires by it, plan and
publish compare digests): a field added or moved here is added or moved there.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from cronsvc.keys import DEFAULT_POOL

#: ``catch_up: none`` drops a fire this late when the file sets no starting_deadline.
NONE_DEADLINE_S = 60.0
FIELDS = ("digest", "catch_up", "deadline_ms", "overlap", "max_attempts", "paused",
          "definition", "notify", "pause_after", "max_concurrent", "limits", "pool",
          "then")


@dataclass(frozen=True)
class Policy:
    """One job's published policy (see the module docstring for each field)."""

    digest: str
    catch_up: str
    deadline_ms: int
    overlap: str
    max_attempts: int
    paused_in_file: bool
    definition: str = ""
    notify: str = ""
    pause_after: int = 0
    max_concurrent: int = 0
    limits: str = ""
    pool: str = DEFAULT_POOL
    then: str = ""

    @classmethod
    def of(cls, job: Any) -> Policy:
        """The policy of a :class:`cronsvc.config.models.Job`."""
        deadline = job.starting_deadline
        if job.catch_up == "none" and not deadline:
            deadline = NONE_DEADLINE_S
        return cls(job.digest, job.catch_up, round(deadline * 1000) if deadline else 0,
                   job.overlap, job.max_attempts, bool(job.paused), job.definition,
                   notify_mask(job.notify_on) if job.notify else "",
                   job.pause_after_failures or 0, job.max_concurrent or 0,
                   ",".join(f"{name}:{cap}" for name, cap in job.slot_limits), job.pool,
                   chain_field(job.on_success, job.on_failure))

    def format(self) -> str:
        """The line as published (empty fields at its end left out)."""
        return "|".join((self.digest, self.catch_up, str(self.deadline_ms), self.overlap,
                         str(self.max_attempts), "1" if self.paused_in_file else "0",
                         self.definition, self.notify,
                         str(self.pause_after) if self.pause_after else "",
                         str(self.max_concurrent) if self.max_concurrent else "",
                         self.limits,
                         "" if self.pool == DEFAULT_POOL else self.pool,
                         self.then)).rstrip("|")

    @staticmethod
    def is_line(line: str) -> bool:
        """Whether ``line`` is a policy line as the claim script reads one: at least its
        first six fields (a line written by hand may be anything; the claim then takes its
        job for removed)."""
        return line.count("|") >= 5

    @classmethod
    def parse(cls, line: str) -> Policy:
        """A published line; missing or malformed fields read as their defaults."""
        (digest, catch_up, deadline, overlap, attempts, paused, definition, notify, pause,
         most, limits, pool, then) = (line.split("|") + [""] * len(FIELDS))[:len(FIELDS)]
        return cls(digest, catch_up, _int(deadline) or 0, overlap, _int(attempts) or 1,
                   paused == "1", definition, notify, _int(pause) or 0, _int(most) or 0, limits,
                   pool or DEFAULT_POOL, then)


def notify_mask(events: Iterable[str]) -> str:
    """The ``notify`` field of the events a job wants: ``,dead,missed,``."""
    return "," + ",".join(sorted(set(events))) + ","


def chain_field(on_success: Iterable[str], on_failure: Iterable[str]) -> str:
    """The ``then`` field: ``s=import,report;f=alert``."""
    parts = [f"{kind}={','.join(jobs)}" for kind, jobs in (("s", on_success), ("f", on_failure))
             if jobs]
    return ";".join(parts)


def chain_targets(then: str) -> dict[str, list[str]]:
    """The ``then`` field read back: ``{"s": [jobs on success], "f": [jobs on failure]}``
    (``lua/claim-*.lua`` reads the ``f=`` part the same way)."""
    found: dict[str, list[str]] = {}
    for part in then.split(";"):
        kind, _, jobs = part.partition("=")
        if jobs:
            found[kind] = jobs.split(",")
    return found


def digest_of(line: str) -> str:
    """The schedule digest of a policy line (its first field), without parsing the rest."""
    return line.split("|", 1)[0]


def _int(value: str) -> int | None:
    try:
        return int(value)
    except ValueError:
        return None
