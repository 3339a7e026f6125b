"""``call``: a Python function of the worker's own environment, ``package.module:function``,
called as ``fn(*args, **kwargs)`` (see :mod:`cronsvc.run.calls`).

An ``async def`` function is awaited as a task on the worker's event loop, without a
thread of its own, and a timeout, a cancel, a lost lease or a shutdown cancels the task.
A sync function with a timeout runs in a thread of its own: a timeout or a cancel is
reported at once, but a thread cannot be killed and is left to finish on its own. Without
one, in the worker's slot thread, which saves a thread per run: a cancel is reported when
the call returns. Cooperative functions poll :func:`cronsvc.stopping` either way. It
reports what the function printed and logged, then the repr of what it returned, or the
exception and its traceback.
"""

from __future__ import annotations

import inspect
import re
import threading
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

from pydantic import field_validator

from cronsvc.kinds.kind import Fields, Kind, Target
from cronsvc.run.calls import (
    NOTHING,
    CallResult,
    ImportProblem,
    call_here,
    is_async,
    resolve,
    start_awaited,
    start_call,
)
from cronsvc.run.context import FireContext
from cronsvc.run.outcome import How, Result, Stop
from cronsvc.run.output import Kept, kept_of, output_cap

_CALL = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*")
#: Modules whose functions run programs or code as a call target, with no `shell: true`.
RISKY_MODULES = frozenset({"os", "posix", "subprocess", "builtins"})


class CallFields(Fields):
    """``call`` and what it is called with."""

    call: str | None = None
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = {}

    @field_validator("call")
    @classmethod
    def _call(cls, value: str | None) -> str | None:
        if value is not None and not _CALL.fullmatch(value):
            raise ValueError("malformed call: expected 'package.module:function'")
        return value


class Call(Kind):
    key = "call"
    hint = "call ('package.module:function')"
    fields = CallFields
    per_job = frozenset({"call", "args", "kwargs"})

    def problem(self, job: Any) -> str | None:
        if job.call is None and (job.args or job.kwargs):
            return "args and kwargs only apply to call jobs"
        return None

    runs_untimed = True

    def run(self, job: Any, ctx: FireContext, stop: Stop) -> Result:
        if stop.deadline is None:
            return self.run_untimed(job, ctx, stop.cancel, stop.output or kept_of(job))
        stopping = threading.Event()
        done, box = start_call(job, ctx, stopping, stop.output)
        how = stop.wait(done)
        if how != "done":
            stopping.set()  # for callables that poll stopping(); the thread itself lives on
            return stop.stopped(how)
        return _result(box[0])

    def run_untimed(self, job: Any, ctx: FireContext, cancel: threading.Event,
                    output: Kept) -> Result:
        # No timeout: the call runs here, and a cancel is seen when it returns (or through
        # stopping(), which the cancel event drives).
        return untimed_result(call_here(job, ctx, cancel, output), cancel)

    def runs_async(self, job: Any) -> bool:
        return is_async(job.call)

    def start(self, job: Any, ctx: FireContext, stop: Stop,
              done: Callable[[Result], None]) -> Callable[[], None]:
        def ended(how: How, res: CallResult) -> None:
            if how == "done":
                done(_result(res))
            else:  # what it printed until it was stopped is kept
                done(stop.stopped(how)._replace(output=res.output))

        return start_awaited(job, ctx, stop.deadline, ended, stop.output)

    def shown(self, job: Any) -> dict[str, Any]:
        return {"call": job.call, "args": list(job.args), "kwargs": dict(job.kwargs)}

    def imports(self, job: Any) -> Mapping[str, Target]:
        return {"call": Target(job.call)}

    def warnings(self, job: Any) -> list[tuple[str, str]]:
        if job.call.partition(":")[0].split(".")[0] in RISKY_MODULES:
            return [("call", f"{job.call!r} can run any program or code (no shell: true "
                             "needed): call a function of your own instead")]
        return []


class Ready(NamedTuple):
    """What a run of an untimed sync call job calls, resolved ahead (:func:`ready`)."""

    fn: Callable[..., Any]
    takes_ctx: bool
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    output: int  # the size of its keeper (:func:`cronsvc.run.output.output_cap`)


def ready(job: Any) -> Ready | None:
    """What a fire of ``job`` calls, if it is a call job without a timeout whose target is
    a sync function that imports: its runs need no ``Stop`` and no thread of their own, and
    the worker runs them through :func:`cronsvc.run.calls.call_with` and
    :func:`untimed_result`, as :meth:`Call.run_untimed` does; else None. Asked once per
    job of a config (the target is resolved once per process anyway)."""
    if job.kind != "call" or job.timeout is not None:
        return None
    try:
        fn, takes_ctx = resolve(job.call)
    except ImportProblem:
        return None  # its runs say why, each
    if inspect.iscoroutinefunction(fn):  # is_async(job.call), resolved already
        return None
    return Ready(fn, takes_ctx, job.args, job.kwargs, output_cap(job))


def untimed_result(res: CallResult, cancel: threading.Event) -> Result:
    """What an untimed call that returned ``res`` reports: cancelled if ``cancel`` was set
    meanwhile (it is seen when the call returns)."""
    if cancel.is_set():
        return _CANCELLED
    return _OK if res is NOTHING else _result(res)  # _result, without its call for most


def _result(res: CallResult) -> Result:
    if res is NOTHING:
        return _OK
    return Result("ok" if res.ok else "failed", None, res.output, res.error)


_OK = Result("ok")  # what most calls report (:data:`NOTHING`)
_CANCELLED = Result("cancelled", error="cancelled")  # Stop.stopped("cancelled")


KIND = Call()
