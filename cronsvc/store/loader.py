"""The script files of ``lua/`` (``<verb>-<numkeys>.lua``) and their error replies.

``<verb>-<numkeys>+.lua`` takes ``numkeys`` fixed keys and then any number more
(one per item of a batch).

Installed, the scripts sit in the package as ``cronsvc/lua`` (the wheel
force-includes them); in an editable install they are the repo's ``lua/``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import redis

from cronsvc.errors import (
    LeaseLost,
    NotLeader,
    ScriptError,
    Skipped,
    Superseded,
    UnknownFire,
    UnknownJob,
)

_NAME = re.compile(r"^([a-z]+(?:-[a-z]+)*)-(\d+)(\+?)\.lua$")
_INCLUDE = re.compile(r"^-- @include ([a-z][a-z0-9_-]*\.lua)$", re.MULTILINE)
INCLUDES = "includes"  # the folder of shared snippets, beside the scripts
_ERRORS: dict[str, type[Exception]] = {
    "LEASE_LOST": LeaseLost, "UNKNOWN_FIRE": UnknownFire, "UNKNOWN_JOB": UnknownJob,
    "SUPERSEDED": Superseded, "NOT_LEADER": NotLeader, "SKIPPED": Skipped,
}


@dataclass(frozen=True)
class ScriptSource:
    """One script file: its verb, the number of KEYS it takes and its text."""

    name: str
    numkeys: int
    path: Path
    text: str
    more_keys: bool = False  # numkeys is the least it takes

    def check_keys(self, count: int) -> None:
        if count != self.numkeys and not (self.more_keys and count > self.numkeys):
            takes = f"at least {self.numkeys + 1}" if self.more_keys else str(self.numkeys)
            raise ScriptError(f"{self.path.name}: takes {takes} keys, got {count}")


def lua_dir() -> Path:
    """Where the scripts are: inside the installed package, else the repo's ``lua/``."""
    package = Path(__file__).resolve().parents[1]  # cronsvc/
    candidates = (package / "lua", package.parent / "lua")
    for candidate in candidates:
        if candidate.is_dir() and any(candidate.glob("*.lua")):
            return candidate
    raise ScriptError(f"no Lua scripts found in {candidates[0]} or {candidates[1]}")


@cache
def load_sources(directory: Path | None = None) -> dict[str, ScriptSource]:
    """Every script of ``directory`` (default :func:`lua_dir`) by verb, includes expanded."""
    base = directory or lua_dir()
    found: dict[str, ScriptSource] = {}
    for path in sorted(base.glob("*.lua")):
        m = _NAME.match(path.name)
        if m is None:
            raise ScriptError(f"{path}: script files are named <verb>-<numkeys>[+].lua")
        if m.group(1) in found:
            raise ScriptError(f"{path}: a second script for {m.group(1)!r}")
        text = expand_includes(path.read_text(), base / INCLUDES, path)
        found[m.group(1)] = ScriptSource(m.group(1), int(m.group(2)), path, text,
                                         more_keys=m.group(3) == "+")
    return found


def expand_includes(text: str, includes: Path, path: Path) -> str:
    """``text`` with each ``-- @include NAME.lua`` line replaced by ``includes/NAME.lua``.

    Shared snippets (the clock, the capped events list, fire id patterns, the history
    line) live once, as in BullMQ's ``src/commands/includes``. An include that needs
    another includes it itself, so each states what it needs; each is expanded once per
    script, where it is first named (a second copy would define its locals again, and the
    script's own ``local`` count is bounded by 200). An include that leads back to itself
    is a :class:`ScriptError` naming the cycle.
    """
    expanded: set[str] = set()

    def expand(text: str, chain: tuple[str, ...]) -> str:
        def include(m: re.Match[str]) -> str:
            name = m.group(1)
            if name in chain:
                cycle = " -> ".join((*chain[chain.index(name):], name))
                raise ScriptError(f"{path}: includes in a cycle: {cycle}")
            if name in expanded:
                return ""
            expanded.add(name)
            source = includes / name
            try:
                snippet = source.read_text().rstrip("\n")
            except OSError:
                raise ScriptError(f"{path}: cannot include {name}: no {source}") from None
            return expand(snippet, (*chain, name))

        return _INCLUDE.sub(include, text)

    return expand(text, ())


def script_error(exc: redis.ResponseError) -> Exception:
    """The cronsvc exception for an error reply of a script."""
    message = str(exc)
    # Redis 7 prefixes Lua error replies with the script name; find the code anywhere near.
    for code, cls in _ERRORS.items():
        if message.startswith(code) or f" {code} " in f" {message} ":
            return cls(message)
    return ScriptError(message)
