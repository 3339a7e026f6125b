"""What an importer returns: the job file as a document, and the notes to print.

A refused entry is left out of the document and named in a note, so the caller decides
what a refusal costs (``cronsvc import`` exits 1 unless told to skip them).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from cronsvc.config.models import JOB_NAME
from cronsvc.durations import format_duration


class Flow(dict[str, Any]):
    """A mapping to write on one line (a ``celery`` target): ``{task: t, args: [1]}``."""


class Quoted(str):
    """A string to write in double quotes, as the docs write a cron expression."""

    __slots__ = ()


@dataclass(frozen=True)
class Note:
    """One thing a person must read: ``place`` is ``FILE:LINE`` or an entry's name."""

    place: str
    message: str
    refused: bool = False

    def __str__(self) -> str:
        return f"{self.place}: {'refused: ' if self.refused else ''}{self.message}"


@dataclass
class Imported:
    """A job file (``{"notify": ..., "jobs": {...}}``, keys in the order to write them)
    and the notes on it."""

    document: dict[str, Any] = field(default_factory=lambda: {"jobs": {}})
    notes: list[Note] = field(default_factory=list)

    @property
    def jobs(self) -> dict[str, dict[str, Any]]:
        jobs: dict[str, dict[str, Any]] = self.document["jobs"]
        return jobs

    @property
    def refused(self) -> list[Note]:
        return [note for note in self.notes if note.refused]

    def note(self, place: str, message: str) -> None:
        self.notes.append(Note(place, message))

    def refuse(self, place: str, message: str) -> None:
        self.notes.append(Note(place, message, refused=True))


_NOT_NAME = re.compile(r"[^A-Za-z0-9_.-]+")


class Names:
    """Valid, unique job names made from what the source calls its entries."""

    def __init__(self) -> None:
        self.taken: set[str] = set()

    def make(self, wanted: str, fallback: str = "job") -> str:
        """``wanted`` with every run of other characters made one ``-`` (a leading one
        dropped), ``-2``, ``-3``... added when already taken."""
        base = _NOT_NAME.sub("-", wanted.strip()).strip("-._").lower() or fallback
        if not JOB_NAME.fullmatch(base):
            base = f"{fallback}-{base}"
        name, n = base, 1
        while name in self.taken:
            n += 1
            name = f"{base}-{n}"
        self.taken.add(name)
        return name


def duration(seconds: float) -> str | float:
    """``seconds`` as the job file writes a duration (``90m``, ``1d``, ``1.5s``); plain
    seconds when not a whole number of milliseconds (the file will refuse those)."""
    ms = seconds * 1000
    return format_duration(round(ms)) if ms == round(ms) and ms > 0 else seconds


def hoist_defaults(out: Imported, keys: tuple[str, ...]) -> None:
    """Move each of ``keys`` that every job sets alike (a crontab's ``PATH``, its
    ``MAILTO``) to the file's ``defaults:``, so it is written once."""
    jobs = list(out.jobs.values())
    shared = {key: jobs[0][key] for key in keys
              if jobs and key in jobs[0] and all(job.get(key) == jobs[0][key] for job in jobs)}
    if len(jobs) < 2 or not shared:
        return
    for job in jobs:
        for key in shared:
            del job[key]
    out.document["defaults"] = shared
