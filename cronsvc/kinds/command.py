"""``command``: a program run as a process of its own, given its fire in ``CRONSVC_*``.

Written as a list of words (an argv, no shell) or a string, split as a shell would split
it; ``shell: true`` runs the one string with ``/bin/sh -c``. ``env`` adds to the worker's
environment, ``cwd`` is where it starts. It runs in a process group of its own, which a
timeout or a cancel kills whole and the worker's watchdog kills when the lease may lapse
(:mod:`cronsvc.run.processes`, :mod:`cronsvc.run.watchdog`). It reports its exit code and
the tail of its output, stdout and stderr merged.
"""

from __future__ import annotations

import shlex
from typing import Any

from pydantic import ValidationInfo, field_validator

from cronsvc.kinds.kind import Fields, Kind, as_text
from cronsvc.run.context import FireContext
from cronsvc.run.outcome import Result, Stop
from cronsvc.run.processes import environ, run_group


class CommandFields(Fields):
    """``command`` and ``shell`` (``env`` and ``cwd``, which a default may give every job,
    are the job's own)."""

    shell: bool = False  # before command: splitting a command string depends on it
    command: tuple[str, ...] | None = None

    @field_validator("command", mode="before")
    @classmethod
    def _command(cls, value: object, info: ValidationInfo) -> object:
        if value is None:
            return None
        if info.data.get("shell", False):
            if not isinstance(value, str):
                raise ValueError("with shell: true, give the command as one string")
            words: list[object] = [value] if value.strip() else []
        elif isinstance(value, str):
            try:
                words = list(shlex.split(value))
            except ValueError as exc:
                raise ValueError(f"cannot split like a shell would: {exc}") from None
        elif isinstance(value, list | tuple):
            words = [as_text(word) for word in value]
        else:
            raise ValueError("expected a list of words or a string")
        if not words:
            raise ValueError("empty command")
        return tuple(words)


class Command(Kind):
    key = "command"
    hint = "command (a program to run)"
    fields = CommandFields
    per_job = frozenset({"command"})
    starts_processes = True

    def run(self, job: Any, ctx: FireContext, stop: Stop) -> Result:
        argv = ["/bin/sh", "-c", " ".join(job.command)] if job.shell else list(job.command)
        # CRONSVC_* last: a job's own env must not be able to fake its fire identity.
        env = {**environ(), **job.env, **ctx.env()}
        return run_group(argv, job.cwd, env, stop)

    def shown(self, job: Any) -> dict[str, Any]:
        return {"command": job.command, "shell": bool(job.shell)}

    def text(self, field: str, value: Any) -> str:
        # The words as one would type them: the row is read, not parsed.
        return " ".join(value) if field == "command" else super().text(field, value)


KIND = Command()
