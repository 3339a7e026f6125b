"""Fire ids: ``<job>@<due_ms>`` for the job's own schedule, ``<job>@<due_ms>#<tag>`` for
one-offs, ``<job>@<due_ms>!<schedule id>`` for the fires of a runtime schedule, and
``<job>@<due_ms>!@<host>`` for one host's run of a fire of a job with ``pool: each-host``
(a schedule id never starts with ``@``).

A fire id is the queue member, the idempotency key handed to the job and the
name of the run in its history, so it must be stable: the same job and due
time always give the same id. Job names never contain ``@``, ``#``, ``!`` or ``|``, and
schedule ids never contain ``@``, ``#``, ``!``, ``|`` or spaces.
"""

from __future__ import annotations

import hashlib
import re
import secrets

from cronsvc.errors import BadArgument

_B32 = "abcdefghijklmnopqrstuvwxyz234567"
#: The grammar of a fire id (``well_formed`` in lua/includes/fires.lua is the same): a job
#: name, ``@``, the due time in at most 15 digits (ms until the year 33658), then nothing,
#: ``#`` and a tag, or ``!`` and a schedule id; then, for one host's run, ``!@`` and a host.
FIRE_ID = re.compile(r"([A-Za-z0-9][A-Za-z0-9_.-]*)@(\d{1,15})"
                     r"(?:#([A-Za-z0-9_.-]+)|!([A-Za-z0-9][A-Za-z0-9_.:/-]*))?"
                     r"(?:!@([A-Za-z0-9_.-]+))?")
TAG_KINDS = {"trigger": "t", "at": "a", "chain": "c"}
#: What follows ``!`` in the id of one host's run of an each-host fire, before the host.
HOST_MARK = "@"


def fire_id(job: str, due_ms: int, tag: str | None = None, *,
            schedule: str | None = None) -> str:
    """The id of ``job``'s fire due at ``due_ms`` (ms since the epoch, UTC): of a one-off
    with ``tag``, of the runtime schedule ``schedule``, else of the job's own schedule."""
    base = f"{job}@{int(due_ms)}"
    if schedule:
        return f"{base}!{schedule}"
    return f"{base}#{tag}" if tag else base


def parse_fire(fid: str) -> tuple[str, int, str | None]:
    """``(job, due_ms, tag or None)`` of a fire id; BadArgument (a ValueError) if it is
    not one."""
    m = FIRE_ID.fullmatch(fid)
    if m is None:
        raise BadArgument(f"not a fire id: {fid!r} (expected <job>@<due_ms>[#<tag>])")
    return m.group(1), int(m.group(2)), m.group(3)


def is_fire_id(text: str) -> bool:
    """Whether ``text`` is a fire id (what Redis holds may not be)."""
    return FIRE_ID.fullmatch(text) is not None


def split_fire(fid: str) -> tuple[str, int, str | None, str | None]:
    """``(job, due_ms, tag, what follows '!')`` of a fire id known to be well formed,
    without a pattern (every ack asks, for each fire); :func:`parse_fire` checks one."""
    at = fid.index("@")
    rest = fid[at + 1:]
    tag, bang = rest.find("#"), rest.find("!")
    mark = tag if bang < 0 or 0 <= tag < bang else bang  # the first of them
    if mark < 0:
        return fid[:at], int(rest), None, None
    due, after = int(rest[:mark]), rest[mark + 1:]
    return (fid[:at], due, after, None) if rest[mark] == "#" else (fid[:at], due, None, after)


def schedule_of(fid: str) -> str | None:
    """The runtime schedule a fire belongs to, or None (the job's own, a one-off, or one
    host's run)."""
    if "!" not in fid:  # every fire a worker runs asks: most are not a schedule's
        return None
    m = FIRE_ID.fullmatch(fid)
    return m.group(4) if m else None


def host_fire(fid: str, host: str) -> str:
    """The id of ``host``'s run of the each-host fire ``fid``."""
    return f"{fid}!{HOST_MARK}{host}"


def host_of(fid: str) -> str | None:
    """The host of one host's run of an each-host fire, else None."""
    at = fid.find("!" + HOST_MARK)
    return fid[at + 2:] if at >= 0 else None


def placed_by(fid: str) -> str:
    """The name whose shard holds the fire: its runtime schedule's id, else its job."""
    return schedule_of(fid) or job_of(fid)


def job_of(fid: str) -> str:
    """The job of a fire id (fast: the hot path of a claim)."""
    return fid[:fid.index("@")]


def kind_of(fid: str) -> str:
    """``cron`` for a fire of the job's own schedule, ``schedule`` for one of a runtime
    schedule, ``trigger`` or ``at`` for a one-off."""
    tag = parse_fire(fid)[2]
    if tag is None:
        if host_of(fid) is not None:
            return "host"
        return "schedule" if "!" in fid else "cron"
    return next((kind for kind, prefix in TAG_KINDS.items() if tag.startswith(prefix)), "at")


def chain_fire(job: str, upstream: str, due_ms: int) -> str:
    """The fire of ``job`` that the end of fire ``upstream`` triggers: the same id however
    often that end is recorded, so a chain never runs twice for one upstream fire."""
    digest = hashlib.sha256(upstream.encode()).digest()
    tag = TAG_KINDS["chain"] + "".join(_B32[b % 32] for b in digest[:6])
    return fire_id(job, due_ms, tag)


def new_tag(kind: str) -> str:
    """A fresh tag for a one-off fire: ``t`` (trigger) or ``a`` (at) + 6 base32 chars.

    ``kind`` is ``"trigger"``/``"at"`` or the one-letter prefix itself.
    """
    prefix = TAG_KINDS.get(kind, kind)
    if prefix not in TAG_KINDS.values():
        raise ValueError(f"unknown one-off kind {kind!r}: expected one of {sorted(TAG_KINDS)}")
    return prefix + "".join(secrets.choice(_B32) for _ in range(6))
