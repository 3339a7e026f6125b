"""Collect located problems of a job file and raise them together as one ConfigError.

Each problem reads ``<file>:<line>: <dotted.path>: <message>``, in file order, so
a user fixes the whole file in one pass instead of one error per run.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from typing import Any

from pydantic import ValidationError

from cronsvc.config.yamlsource import OUTSIDE, KeyPath, Located
from cronsvc.errors import ConfigError, did_you_mean
from cronsvc.outbound import UNQUOTED

_SCALARS = (str, int, float, bool)


def dotted(path: KeyPath) -> str:
    """``jobs.backup.command[0]`` for ``("jobs", "backup", "command", 0)``."""
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


class Report:
    """The problems found so far in one file."""

    def __init__(self, source: str, located: Located) -> None:
        self.source = source
        self.located = located
        self._found: dict[str, int] = {}

    def add(self, path: KeyPath, message: str, line: int | None = None,
            place: str | None = None) -> None:
        """Record ``message`` about ``path``; its place comes from the YAML (or where the
        path was written outside it) unless ``line`` or ``place`` is given."""
        if place is not None:
            sort = OUTSIDE
        elif line:
            place, sort = f"{self.source}:{line}", line
        else:
            place, sort = self.located.place(self.source, path)
        text = f"{place}: {dotted(path)}: {message}" if path else f"{place}: {message}"
        self._found.setdefault(text, sort)

    def unknown_keys(
        self, path: KeyPath, mapping: Mapping[Any, Any], known: Collection[str]
    ) -> None:
        """Report every key of ``mapping`` not in ``known``, with a suggestion if one is close."""
        for key in mapping:
            if key not in known:
                self.add((*path, key), "unknown key" + did_you_mean(key, known))

    def validation(
        self,
        exc: ValidationError,
        place: Callable[[tuple[Any, ...]], KeyPath | None],
        fields: Collection[str],
    ) -> None:
        """Report pydantic's errors; ``place`` maps a loc to a path, or None to skip it."""
        for err in exc.errors():
            path = place(tuple(err["loc"]))
            if path is None:
                continue
            kind = err["type"]
            if kind == "extra_forbidden":
                self.add(path, "unknown key" + did_you_mean(path[-1], fields))
                continue
            if kind == "missing":
                self.add(path, "missing (required)")
                continue
            if kind == UNQUOTED:
                self.add(path, err["msg"])
                continue
            if kind == "value_error":
                message = str(err["ctx"]["error"])
            else:
                message = err["msg"][:1].lower() + err["msg"][1:]
            value = err.get("input")
            if isinstance(value, _SCALARS) and repr(value) not in message:
                message = f"{value!r}: {message}"
            self.add(path, message)

    @property
    def problems(self) -> list[str]:
        """Every problem, in the order of the lines they are on."""
        return sorted(self._found, key=lambda text: self._found[text])

    def raise_if_any(self) -> None:
        """Raise ConfigError with every problem, if there is one."""
        if self._found:
            raise ConfigError(self.problems)
