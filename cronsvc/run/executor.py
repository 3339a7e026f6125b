"""Runs one job and returns an :class:`Outcome`. Knows nothing of Redis.

`command` jobs run as a child process in a process group of their own
(:mod:`cronsvc.run.processes`), which a timeout or a cancel kills whole. A
:class:`~cronsvc.run.outcome.Guard` given to :func:`execute` learns the group as soon
as it exists and when it has ended (the worker hands it to its watchdog, see
:mod:`cronsvc.run.watchdog`).

`call` jobs run a Python callable (see :mod:`cronsvc.run.calls`). With a
timeout, in a thread of its own: a timeout or cancel is reported at once, but
the thread cannot be killed and is left to finish on its own. Without one, in
the caller's thread, which saves a thread per run: a cancel is reported when
the call returns. Cooperative callables poll :func:`cronsvc.stopping` either way.

:func:`execute` never raises: every problem becomes a "failed" outcome.
"""

from __future__ import annotations

import os
import threading
from typing import Any

from cronsvc.clock import SYSTEM, Clock, monotonic
from cronsvc.run.calls import CallResult, call_here, start_call
from cronsvc.run.context import FireContext
from cronsvc.run.outcome import Guard, Outcome, Result, Stop
from cronsvc.run.processes import run_group


def execute(
    job: Any, ctx: FireContext, cancel: threading.Event | None = None, clock: Clock = SYSTEM,
    guard: Guard | None = None,
) -> Outcome:
    """Run `job` (a `cronsvc.config.models.Job`, or anything with its attributes) once.

    Returns when the job has finished, timed out (`job.timeout` seconds) or
    `cancel` was set; the status says which.
    """
    started_ms = clock.now_ms()
    t0 = monotonic()
    cancel = cancel if cancel is not None else threading.Event()
    deadline = None if job.timeout is None else t0 + job.timeout
    stop = Stop(cancel, job.timeout, deadline, guard)
    try:
        if cancel.is_set():
            result = Result("cancelled", error="cancelled before start")
        elif job.call is not None:
            result = _run_call(job, ctx, stop)
        elif job.command:
            result = _run_command(job, ctx, stop)
        else:
            result = Result("failed", error=f"job {job.name} has neither command nor call")
    except Exception as exc:  # a worker thread must get an outcome, whatever went wrong
        result = Result("failed", error=f"{type(exc).__name__}: {exc}")
    duration_ms = int((monotonic() - t0) * 1000)
    return Outcome(result.status, started_ms, duration_ms, *result[1:])


def _run_call(job: Any, ctx: FireContext, stop: Stop) -> Result:
    if stop.deadline is None:
        # No timeout: the call runs here, and a cancel is seen when it returns (or
        # through stopping(), which the cancel event drives).
        res = call_here(job, ctx, stop.cancel)
        return stop.stopped("cancelled") if stop.cancel.is_set() else _result(res)
    stopping = threading.Event()
    done, box = start_call(job, ctx, stopping)
    how = stop.wait(done)
    if how != "done":
        stopping.set()  # for callables that poll stopping(); the thread itself lives on
        return stop.stopped(how)
    return _result(box[0])


def _result(res: CallResult) -> Result:
    return Result("ok" if res.ok else "failed", None, res.output, res.error)


def _run_command(job: Any, ctx: FireContext, stop: Stop) -> Result:
    argv = ["/bin/sh", "-c", " ".join(job.command)] if job.shell else list(job.command)
    # CRONSVC_* last: a job's own env must not be able to fake its fire identity.
    env = {**os.environ, **job.env, **ctx.env()}
    return run_group(argv, job.cwd, env, stop)
