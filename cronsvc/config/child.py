"""Import the user's modules in a child process, one step at a time, each with a deadline.

Importing runs a module's code: it may raise, exit, crash the interpreter or hang. Done in
a child of this Python, none of that reaches the process that asked (a validator, a
planner reloading its file), and every import sees the code on disk now, never a module
imported earlier. The child runs a script given as text, which reports on its stdout in
lines: ``begin I`` when it starts step I, then ``[I, answer]`` (JSON) when it is done; what
the imported modules print goes elsewhere (the script's business). A step that ends the
child, or takes longer than its deadline, stops it: the caller learns which, and why.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
from dataclasses import dataclass, field
from typing import Any

from cronsvc.clock import monotonic

#: Seconds one step (one module, one call target) may take to import before it counts as
#: hung.
IMPORT_TIMEOUT_S = 10.0


@dataclass
class Steps:
    """What one child answered, step by step; ``stopped_at`` is the step it did not finish
    (None if it finished them all), and ``why`` says how it stopped there
    (``importing took longer than 10s``)."""

    answers: dict[int, Any] = field(default_factory=dict)
    stopped_at: int | None = None
    why: str = ""


def run_steps(script: str, argument: str, count: int, timeout: float,
              env: dict[str, str] | None = None) -> Steps:
    """Run ``script`` (``python -c``) with ``argument``, expecting ``count`` steps, each
    given ``timeout`` seconds; the child is killed, with what it started, once it is done
    or late."""
    proc = subprocess.Popen(
        [sys.executable, "-c", script, argument], stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, start_new_session=True, env=env)
    assert proc.stdout is not None
    out = Steps()
    current: int | None = None
    hung = False
    try:
        current, hung = _read(proc.stdout.fileno(), out, timeout)
    finally:
        if proc.poll() is None:
            # Its own session: whatever the import started goes too.
            os.killpg(proc.pid, signal.SIGKILL)
        code = proc.wait()
        proc.stdout.close()
    if current is None and len(out.answers) < count:
        current = len(out.answers)  # the child died before it began the next one
    if current is None:
        return out
    out.stopped_at = current
    if hung:
        out.why = f"importing took longer than {timeout:g}s"
    elif code < 0:
        out.why = f"importing killed the process ({signal.strsignal(-code)})"
    else:
        out.why = f"importing ended the process (exit code {code})"
    return out


def _read(fd: int, out: Steps, timeout: float) -> tuple[int | None, bool]:
    """Read the child's lines into ``out`` until it closes its stdout or a step is late:
    the step it is in (None between two), and whether it was late."""
    current: int | None = None
    buffer = b""
    deadline = monotonic() + timeout
    while True:
        left = deadline - monotonic()
        if left <= 0:
            return current, True
        if not select.select([fd], [], [], left)[0]:
            continue
        chunk = os.read(fd, 65536)
        if not chunk:
            return current, False
        buffer += chunk
        *lines, buffer = buffer.split(b"\n")
        for line in lines:
            if line.startswith(b"begin "):
                current = int(line.split()[1])
                deadline = monotonic() + timeout  # each step gets its own time
            else:
                i, answer = json.loads(line)
                out.answers[i] = answer
                current = None
