"""The policy line: how a job's fires are judged at claim time, as Redis holds it.

The claim script cannot read the job file, so the planner publishes, per job,
one line the script parses with a single pattern match::

    digest|catch_up|deadline_ms|overlap|max_attempts|paused|definition

- ``digest``: 12 hex chars of the schedule (cron, zone, jitter); a new digest
  means new fire times, so the old fires are unqueued and planning restarts.
- ``catch_up``: ``all``, ``latest`` or ``none``.
- ``deadline_ms``: the starting deadline (0: none). ``catch_up: none`` without
  one gets :data:`NONE_DEADLINE_S`.
- ``overlap``: ``allow``, ``forbid`` or ``replace``.
- ``max_attempts``: the first run plus the retries.
- ``paused``: ``1`` when the job file pauses the job, else ``0``.
- ``definition``: 12 hex chars of what runs (command or call, env, timeout,
  retries...). A worker takes a fire only if it holds this very definition.

:class:`Policy` is the only writer and reader of the line in Python;
``lua/claim-*.lua`` and ``lua/plan-*.lua`` read the same fields.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

#: ``catch_up: none`` drops a fire this late when the file sets no starting_deadline.
NONE_DEADLINE_S = 60.0
FIELDS = ("digest", "catch_up", "deadline_ms", "overlap", "max_attempts", "paused",
          "definition")


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

    @classmethod
    def of(cls, job: Any) -> Policy:
        """The policy of a :class:`cronsvc.config.models.Job`."""
        deadline = job.starting_deadline
        if job.catch_up == "none" and not deadline:
            deadline = NONE_DEADLINE_S
        return cls(job.digest, job.catch_up, round(deadline * 1000) if deadline else 0,
                   job.overlap, job.max_attempts, bool(job.paused), job.definition)

    def format(self) -> str:
        """The line as published."""
        return "|".join((self.digest, self.catch_up, str(self.deadline_ms), self.overlap,
                         str(self.max_attempts), "1" if self.paused_in_file else "0",
                         self.definition))

    @classmethod
    def parse(cls, line: str) -> Policy:
        """A published line; missing or malformed fields read as their defaults."""
        digest, catch_up, deadline, overlap, attempts, paused, definition = (
            line.split("|") + [""] * len(FIELDS))[:len(FIELDS)]
        return cls(digest, catch_up, _int(deadline) or 0, overlap, _int(attempts) or 1,
                   paused == "1", definition)


def digest_of(line: str) -> str:
    """The schedule digest of a policy line (its first field), without parsing the rest."""
    return line.split("|", 1)[0]


def _int(value: str) -> int | None:
    try:
        return int(value)
    except ValueError:
        return None
