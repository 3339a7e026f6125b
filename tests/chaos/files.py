"""The two job files a chaos fleet runs: ``v1``, and ``v2``, which a rolling deploy
brings in (and a later deploy rolls back).

v2 removes ``latest-2``, adds ``added-0``, gives ``all-1`` another definition (what
runs changes, its fire times do not) and ``none-0`` another schedule (its fires
change). ``cmd-0`` is a command whose work runs in a grandchild of the worker.
"""

from __future__ import annotations

import sys
from typing import Any

STARTING_DEADLINE = 2.0  # seconds, of the jobs with catch_up all
VERSIONS = ("v1", "v2")
#: The named limit of the limits scenario: its three jobs want more slots than it has.
LIMITS = {"db": 2}


def chaos_jobs(ledger: str, version: str = "v1", limits: bool = False) -> dict[str, Any]:
    """Every-second jobs with each catch-up rule, a slow one that forbids overlap, and a
    command whose work is done by a grandchild; with ``limits``, three commands tagged
    ``db`` (at most :data:`LIMITS` at once), one of them waiting its turn (overlap queue)."""

    def job(cron: str, longest_ms: int = 300, tag: str = "", **options: Any) -> dict[str, Any]:
        kwargs: dict[str, Any] = {"path": ledger, "longest_ms": longest_ms}
        if tag:
            kwargs["version"] = tag
        return {"cron": cron, "call": "tests.chaos.jobs:work", "kwargs": kwargs, **options}

    v2 = version == "v2"
    jobs = {f"latest-{i}": job("* * * * * *") for i in range(2 if v2 else 3)}
    if v2:
        jobs["added-0"] = job("* * * * * *")
    jobs["all-0"] = job("* * * * * *", catch_up="all", starting_deadline=STARTING_DEADLINE)
    jobs["all-1"] = job("* * * * * *", tag=version, catch_up="all",
                        starting_deadline=STARTING_DEADLINE)
    jobs["none-0"] = job("*/3 * * * * *" if v2 else "*/2 * * * * *", catch_up="none",
                         starting_deadline=STARTING_DEADLINE)
    jobs["slow-0"] = job("*/3 * * * * *", longest_ms=2500, overlap="forbid", retries=1)
    # `& wait`: the work is a grandchild, which a worker's death must take with it.
    jobs["cmd-0"] = {
        "cron": "*/2 * * * * *", "shell": True, "catch_up": "all",
        "starting_deadline": STARTING_DEADLINE,
        "command": f"{sys.executable} -m tests.chaos.jobs {ledger} 1500 cmd & wait",
    }
    if limits:
        for i in range(3):
            jobs[f"db-{i}"] = {
                "cron": "* * * * * *", "shell": True, "tags": ["db"],
                "overlap": "queue" if i == 0 else "allow",
                "command": f"{sys.executable} -m tests.chaos.jobs {ledger} 1500 {version} & wait",
            }
    return jobs
