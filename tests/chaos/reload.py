"""The reload scenario's parts: every-second `call` jobs whose module lives in the run's
folder, workers run with ``cronsvc worker --reload``, and the module rewritten while they
run, so each supervisor swaps its worker for one on the new code.

Each version of the module notes its number (``code``) beside the chaos ledger's fields,
so the judge (tests/chaos/ledger.py) reads the ledger unchanged, and :func:`code_runs`
checks what a swap is for: each worker process ran one version of the code, and the
last version written is the one that runs at the end. A broken version (a syntax error)
leaves each supervisor's worker running on the code it has, until the fix.
"""

from __future__ import annotations

import collections
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

MODULE = "chaos_reload"
JOBS = 3  # every second each, with runs up to LONGEST_MS: a swap finds runs in flight
LONGEST_MS = 1500
#: Version ``number`` of the module; its size grows with the number, so no two versions
#: share a size (an interpreter's cached bytecode is keyed by the source's mtime in
#: seconds and its size).
CODE = '''"""Version {number} of the reload scenario's code{pad}."""

import time

from cronsvc.testing.ledger import note
from tests.chaos.jobs import duration

CODE = {number}


def work(path, longest_ms, ctx=None):
    note(path, "start", ctx, version="v1", kind="call", code=CODE)
    time.sleep(duration(ctx.fire_id, longest_ms))
    note(path, "end", ctx, version="v1", kind="call", code=CODE)
'''
BROKEN = "def work(path, longest_ms, ctx=None)\n    pass\n"  # no colon
UP = re.compile(r"worker pid (\d+) up")
SWAPPED = re.compile(r"code changed: \S+; new worker pid \d+ up, old worker pid \d+ finishing")
REFUSED = "the new code does not run"


def reload_jobs(ledger: str) -> dict[str, Any]:
    """Every-second `call` jobs of the module; each fire runs, however late."""
    return {f"code-{i}": {
        "cron": "* * * * * *", "catch_up": "all", "call": f"{MODULE}:work",
        "kwargs": {"path": ledger, "longest_ms": LONGEST_MS},
    } for i in range(JOBS)}


@dataclass
class Code:
    """The module the jobs call, in ``folder`` (on the workers' import path), and the
    versions of it written so far."""

    folder: Path
    versions: int = 0
    broken: int = 0

    @property
    def path(self) -> Path:
        return self.folder / f"{MODULE}.py"

    def write_next(self) -> int:
        """Write the next version; its number."""
        self.versions += 1
        self._write(CODE.format(number=self.versions, pad="." * self.versions))
        return self.versions

    def write_broken(self) -> None:
        self.broken += 1
        self._write(BROKEN)

    def _write(self, text: str) -> None:
        # In place, whole: a worker importing it never reads half a version.
        tmp = self.folder / f".{MODULE}.tmp"
        tmp.write_text(text)
        os.replace(tmp, self.path)


def swaps(log: str) -> int:
    """The swaps a supervisor's log tells of: new code up, the old worker finishing."""
    return len(SWAPPED.findall(log))


def refusals(log: str) -> int:
    """The versions a supervisor found did not run (its old worker kept running)."""
    return log.count(REFUSED)


def up_pids(log: str) -> set[int]:
    """The worker processes a supervisor saw registered: only those may be killed, since
    one killed before its supervisor saw it up counts as one that could not start."""
    return {int(pid) for pid in UP.findall(log)}


@dataclass
class CodeRuns:
    """What the ledger says of the versions of the code."""

    processes: int = 0  # worker processes that ran fires
    versions: dict[int, int] = field(default_factory=dict)  # version -> starts
    mixed: list[str] = field(default_factory=list)  # a process that ran two versions
    last: int | None = None  # the version of the last run started

    def lines(self, code: Code, swapped: int, refused: int, supervisors: int) -> list[str]:
        return [
            f"code versions written: {code.versions} and {code.broken} broken; swaps: "
            f"{swapped} across {supervisors} supervisors; broken versions refused: {refused}",
            f"worker processes that ran fires: {self.processes}; versions that ran: "
            f"{len(self.versions)}; the last run's: {self.last}",
            f"worker processes that ran two versions of the code: {len(self.mixed)}",
        ]


def code_runs(ledger: list[dict[str, Any]]) -> CodeRuns:
    """Per worker process, the versions of the code its runs noted."""
    starts = sorted((e for e in ledger if e["event"] == "start" and "code" in e),
                    key=lambda e: e["at_ms"])
    by_pid: dict[int, set[int]] = collections.defaultdict(set)
    for e in starts:
        by_pid[e["pid"]].add(e["code"])
    return CodeRuns(
        processes=len(by_pid),
        versions=dict(collections.Counter(e["code"] for e in starts)),
        mixed=[f"pid {pid} ran versions {sorted(v)}" for pid, v in by_pid.items() if len(v) > 1],
        last=starts[-1]["code"] if starts else None)
