"""A user's job function: the nightly report a job file schedules."""

from pathlib import Path
from typing import Any


def report(out: str, ctx: Any = None) -> None:
    Path(out).write_text(f"report of {ctx.job}, fire {ctx.fire_id}\n")
