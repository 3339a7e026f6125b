"""Collect the jobs declared in Python (:mod:`cronsvc.config.declare`) by the modules a job
file's ``discover:`` names.

The modules are imported in a child process (:mod:`cronsvc.config.child`), never in the
process that reads the file: a module that raises, exits, crashes or hangs cannot take a
planner or a worker down, and each collection imports the code on disk now, so a reload
sees an edited module. The child finds modules on this process's import path, then in
the working directory, and answers, for each module, the declarations its import made,
each with its ``module:line``, and the files to watch for a change. A problem becomes a
located problem of the job file; the file's own checks then judge each declared job as if
it were written in the file (:func:`cronsvc.config.models.parse_located`).
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from cronsvc.config.child import IMPORT_TIMEOUT_S, run_steps

#: A module's dotted name, as ``discover:`` lists them.
MODULE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")

# Runs in the child. What the imported modules print goes to stderr (dropped); the report
# has fd 1 to itself.
_CHILD = r"""
import importlib, json, os, sys
report = os.fdopen(os.dup(1), "w")
os.dup2(2, 1)
given = json.loads(sys.argv[1])
sys.path[:] = list(dict.fromkeys([*given["path"], "", *sys.path]))
from cronsvc.config import declare

def at(exc):
    if isinstance(exc, SyntaxError) and exc.filename and exc.lineno:
        return f"{declare.shown_path(exc.filename)}:{exc.lineno}"
    found, tb = None, exc.__traceback__
    while tb is not None:  # the deepest module-level line: the import that failed
        code = tb.tb_frame.f_code
        if code.co_name == "<module>" and not code.co_filename.startswith("<"):
            found = f"{declare.shown_path(code.co_filename)}:{tb.tb_lineno}"
        tb = tb.tb_next
    return found

for i, name in enumerate(given["modules"]):
    report.write(f"begin {i}\n")
    report.flush()
    before = len(declare.DECLARED)
    answer = {"problem": None, "at": None, "files": []}
    try:
        module = importlib.import_module(name)
        answer["files"] = [f for f in [getattr(module, "__file__", None)] if f]
    except BaseException as exc:  # SystemExit of a module is a finding too
        answer["problem"] = f"cannot import {name}: {type(exc).__name__}: {exc}"
        answer["at"] = at(exc)
    answer["declared"] = [d.as_json() for d in declare.DECLARED[before:]]
    report.write(json.dumps([i, answer]) + "\n")
    report.flush()
"""


@dataclass(frozen=True)
class Declared:
    """A job declared in Python, as the child reported it (see
    :class:`cronsvc.config.declare.Declaration`)."""

    name: str
    fields: dict[str, Any]
    place: str
    problems: tuple[tuple[str, str], ...] = ()


@dataclass
class Collected:
    """What importing the modules declared, the files they were read from, and the
    problems met: ``(index in discover, place or None, message)``."""

    jobs: list[Declared] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    problems: list[tuple[int, str | None, str]] = field(default_factory=list)


def collect(modules: Sequence[str], timeout: float = IMPORT_TIMEOUT_S) -> Collected:
    """Import ``modules`` in a child process, in order (each given ``timeout`` seconds),
    and gather what they declared. One that ends the child or hangs ends the collection:
    the modules after it are not imported (they would be by a new child, with the
    modules before them again, and their jobs declared twice)."""
    out = Collected()
    if not modules:
        return out
    given = json.dumps({"path": sys.path, "modules": list(modules)})
    steps = run_steps(_CHILD, given, len(modules), timeout)
    for i in sorted(steps.answers):
        answer = steps.answers[i]
        if answer["problem"] is not None:
            out.problems.append((i, answer["at"], answer["problem"]))
        out.files += answer["files"]
        for decl in answer["declared"]:
            out.jobs.append(Declared(decl["name"], decl["fields"], decl["place"],
                                     tuple((k, m) for k, m in decl["problems"])))
            out.files.append(decl["file"])
    if steps.stopped_at is not None:
        out.problems.append((steps.stopped_at, None,
                             f"cannot import {modules[steps.stopped_at]}: {steps.why}"))
    out.files = list(dict.fromkeys(out.files))
    return out
