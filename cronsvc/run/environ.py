"""``${VAR}`` in what the job file sends (a webhook's URL, a broker's, a request's
headers): text read from the process's environment when it is used, so a secret never
lands in the file's published definition, in Redis or in a log."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

from cronsvc.errors import CronsvcError

#: ``${VAR}``: text read from the environment when sending.
VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


class MissingVariable(CronsvcError):
    """A ``${VAR}`` whose variable this process's environment lacks."""


def expand(text: str, where: str, environ: Mapping[str, str] | None = None) -> str:
    """``text`` with each ``${VAR}`` replaced from the environment; MissingVariable,
    naming ``where`` and the variable (never a value), if one is not set."""
    env = os.environ if environ is None else environ

    def value(m: re.Match[str]) -> str:
        name = m.group(1)
        if name not in env:
            raise MissingVariable(f"{where}: environment variable {name} is not set")
        return env[name]

    return VAR.sub(value, text)
