"""What `cronsvc validate` checks beyond a valid file: warnings, and call targets that
really import.

A valid file may still hold a schedule that never fires (``* * 31 2 *``), what a kind
of job warns of (a ``call`` into ``os``/``subprocess``/``builtins``, which runs any
program without ``shell: true``), or an email channel that sends without TLS
(``insecure_plaintext``): all are warnings, located like errors. With ``--imports``
every target a job's kind names (a ``call``'s function) is imported and checked
callable in a child process of this Python: importing runs the module's code, and a
module that exits, crashes or hangs must not take the validator with it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import NamedTuple

from cronsvc.clock import ms_to_dt
from cronsvc.config.child import IMPORT_TIMEOUT_S, run_steps
from cronsvc.config.models import Config, Job, parse_located, parse_partly, read_job_file
from cronsvc.config.report import dotted
from cronsvc.config.yamlsource import KeyPath, Located
from cronsvc.kinds import KINDS
from cronsvc.kinds.kind import Target
from cronsvc.schedule.expand import NEXT_FIRE_YEARS, Spec, explain, next_fires
from cronsvc.schedule.fields import parse as parse_cron

# Runs in the child: stdlib only, so it works whatever the child can import, and as
# little of it as can be: the first target's time includes the child's start. What the
# imported modules print goes to stderr (dropped); the report has fd 1 to itself.
_CHILD = r"""
import importlib, json, os, sys
report = os.fdopen(os.dup(1), "w")
os.dup2(2, 1)
def is_async(obj):  # inspect.iscoroutinefunction, without importing inspect (slow)
    while type(obj).__name__ == "partial" and hasattr(obj, "func"):
        obj = obj.func
    code = getattr(getattr(obj, "__func__", obj), "__code__", None)
    return bool(code is not None and code.co_flags & 0x80)  # CO_COROUTINE
for i, (path, has) in enumerate(json.loads(sys.argv[1])):
    report.write(f"begin {i}\n")
    report.flush()
    module, _, attr = path.partition(":")
    try:
        obj = importlib.import_module(module)
        for part in attr.split("."):
            obj = getattr(obj, part)
        fits = callable(obj) if has is None else hasattr(obj, has)
        wanted = "is not callable" if has is None else f"has no {has}"
        problem = None if fits else f"{path} {wanted} (type {type(obj).__name__})"
        awaited = has is None and is_async(obj)
    except BaseException as exc:  # SystemExit of a module is a finding too
        problem = f"cannot import {path}: {type(exc).__name__}: {exc}"
        awaited = False
    report.write(json.dumps([i, [problem, awaited]]) + "\n")
    report.flush()
"""


@dataclass(frozen=True)
class Checked:
    """A valid job file and where each of its keys is."""

    config: Config
    located: Located

    def place(self, path: KeyPath) -> str:
        """``file:line`` of ``path``, or ``module:line`` in a job declared in Python."""
        return self.located.place(self.config.source, path)[0]

    def line(self, path: KeyPath) -> int:
        """What to sort a problem of ``path`` by: file lines first, then declared jobs."""
        return self.located.place(self.config.source, path)[1]


def check_file(path: str) -> Checked:
    """Read and check the job file at ``path`` (ConfigError lists every problem)."""
    return Checked(*parse_located(read_job_file(path), path))


def check_partly(path: str) -> tuple[Checked, list[str]]:
    """What of the job file at ``path`` checks, and every problem of the rest; ConfigError
    only when nothing of it reads."""
    config, located, problems = parse_partly(read_job_file(path), path)
    return Checked(config, located), problems


def warnings(checked: Checked, now_ms: int) -> list[str]:
    """``file:line: warning: jobs.NAME.FIELD: ...`` (or ``notify.NAME...``) for what is
    valid but likely wrong or unsafe."""
    found: list[tuple[KeyPath, str]] = []
    for name, job in checked.config.jobs.items():
        spec = job.schedule
        bare = Spec(spec.cron, spec.timezone, name)  # the expression alone, without bounds
        if spec.cron is not None and not next_fires(bare, now_ms, 1):
            found.append((("jobs", name, "cron"), f"{job.cron!r} never fires (no fire in the "
                          f"next {NEXT_FIRE_YEARS} years)"))
        elif (spec.cron or spec.every_ms) and not next_fires(spec, now_ms, 1):
            field = "max_runs" if job.max_runs and not (job.end_ms and job.end_ms < now_ms) else (
                "end" if job.end is not None else "start")
            found.append((("jobs", name, field), "no fire from now on (the schedule has ended)"))
        found += [(("jobs", name, *key.split(".")), message)
                  for key, message in KINDS[job.kind].warnings(job)]
        found += [(("jobs", name, "cron"), message) for message in dst_notes(job, now_ms)]
    for name, channel in checked.config.notify.items():
        if channel.email is not None and channel.email.insecure_plaintext:
            found.append((("notify", name, "email", "insecure_plaintext"),
                          "mail and any SMTP password go unencrypted (no TLS): only for a "
                          "relay on this host or a network you trust"))
    lines = [(checked.line(path), path, message) for path, message in found]
    return [f"{checked.place(path)}: warning: {dotted(path)}: {message}"
            for _, path, message in sorted(lines, key=lambda item: item[0])]


#: How far ahead ``validate`` looks for DST nights a fixed-time job meets.
DST_LOOKAHEAD_DAYS = 366
_GAP = re.compile(r"^moved: (\S+) does not exist \(DST gap\), runs at (\S+)")
_FOLD = re.compile(r"^repeated hour: runs in the first pass only")


def dst_notes(job: Job, now_ms: int) -> list[str]:
    """What the DST nights of the next 12 months do to a fixed-time job: a slot that does
    not exist (it runs at the transition) or happens twice (it runs in the first pass)."""
    if job.cron is None or job.every is not None or not parse_cron(job.cron).fixed:
        return []
    start = ms_to_dt(now_ms)
    out = []
    for fire in explain(job.schedule, start, start + timedelta(days=DST_LOOKAHEAD_DAYS)):
        note = fire.note or ""
        day = fire.local.strftime("%Y-%m-%d")
        if m := _GAP.match(note):
            out.append(f"on {day} {m.group(1)} does not exist in {job.timezone}; "
                       f"runs at {m.group(2)}")
        elif _FOLD.match(note):
            out.append(f"on {day} {fire.local.strftime('%H:%M')} happens twice in "
                       f"{job.timezone}; runs once, at the first ({fire.local.tzname()})")
    return out


class Validated(NamedTuple):
    """What ``cronsvc validate`` found in a job file, all at once: its config (of what
    checks, the whole file when there are no errors), its warnings, with ``--imports``
    the jobs whose target is an ``async def`` function (awaited on the worker's event
    loop, and stoppable), else None, and its errors (with those of ``--imports``)."""

    config: Config
    warnings: list[str]
    async_jobs: list[str] | None = None
    errors: tuple[str, ...] = ()


def import_problems(checked: Checked, timeout: float = IMPORT_TIMEOUT_S
                    ) -> tuple[list[str], list[str]]:
    """A located error for each target of a job's kind (a ``call``'s function) that does
    not import as a callable, and the jobs whose target is async."""
    targets: dict[Target, list[KeyPath]] = {}
    for name, job in checked.config.jobs.items():
        for key, target in KINDS[job.kind].imports(job).items():
            targets.setdefault(target, []).append(("jobs", name, *key.split(".")))
    failed, awaited = check_imports(list(targets), timeout)
    async_jobs = sorted({str(path[1]) for target in awaited for path in targets[target]})
    out = []
    for target, why in failed.items():
        for path in targets[target]:
            out.append((checked.line(path),
                        f"{checked.place(path)}: {dotted(path)}: {why}"))
    return [text for _, text in sorted(out)], async_jobs


def check_imports(targets: Sequence[Target], timeout: float = IMPORT_TIMEOUT_S
                  ) -> tuple[dict[Target, str], set[Target]]:
    """Each target that does not import, or is not what it must be -> why (the others
    are left out), and the targets that are ``async def`` functions.

    Each child process imports the targets in turn; one that ends the child (exit,
    crash) or takes longer than ``timeout`` seconds is reported, and a new child
    goes on with the rest.
    """
    failed: dict[Target, str] = {}
    awaited: set[Target] = set()
    todo = list(dict.fromkeys(targets))
    while todo:
        steps = run_steps(_CHILD, json.dumps([list(t) for t in todo]), len(todo), timeout)
        for i, (problem, is_async) in steps.answers.items():
            if problem is not None:
                failed[todo[i]] = problem
            elif is_async:
                awaited.add(todo[i])
        if steps.stopped_at is None:
            break
        failed[todo[steps.stopped_at]] = f"cannot import {todo[steps.stopped_at].path}: " \
                                         f"{steps.why}"
        todo = todo[steps.stopped_at + 1:]
    return failed, awaited


def check(path: str, now_ms: int, *, imports: bool = False,
          timeout: float = IMPORT_TIMEOUT_S) -> Validated:
    """The config at ``path``, its warnings, (``imports``) its async jobs and every error,
    those of ``--imports`` included: the warnings and imports of the jobs that check are
    shown beside the errors of the others. ConfigError only when nothing of it reads."""
    checked, errors = check_partly(path)
    found = warnings(checked, now_ms)
    if not imports:
        return Validated(checked.config, found, None, tuple(errors))
    problems, async_jobs = import_problems(checked, timeout)
    return Validated(checked.config, found, async_jobs, (*errors, *problems))
