"""Running `call` jobs: a Python callable named `package.module:function`.

A job with a timeout runs in a daemon thread of its own, so that the timeout
or a cancel can be reported on time; one without runs in the thread that asked
(:func:`call_here`). A thread cannot be killed, so call jobs should be
cooperative: long-running ones check :func:`cronsvc.stopping` now and then and return
when it is true. One that ignores it keeps running in the background until it
returns; its result is then discarded.

The callable is invoked as ``fn(*job.args, **job.kwargs)``. It receives its
:class:`~cronsvc.run.context.FireContext` through :func:`~cronsvc.run.context.current` and, when its
signature has a parameter named ``ctx``, also as the keyword ``ctx``. A traced fire's call
runs in the context of its span (:mod:`cronsvc.run.tracecontext`): the spans it makes are
children of the fire's.

An ``async def`` target (:func:`is_async`) is awaited on the worker's event loop
(:func:`start_awaited`, :mod:`cronsvc.run.awaits`) and can be stopped; a sync target that
returns a coroutine anyway (a wrapper, a lambda) has it awaited there too, its thread
waiting. What a call prints and logs is kept in its output (:mod:`cronsvc.run.capture`).
"""

from __future__ import annotations

import importlib
import inspect
import sys
import threading
import traceback
from collections.abc import Callable
from typing import Any, NamedTuple

from cronsvc.run import tracecontext
from cronsvc.run.awaits import Awaited
from cronsvc.run.capture import install, kept
from cronsvc.run.context import Deferred, FireContext, made
from cronsvc.run.outcome import OUTPUT_CAP, SLICE, How
from cronsvc.run.output import Kept, kept_of
from cronsvc.run.within import RUN, InRun

# Resolving is cheap once the module is imported, but inspect.signature is not:
# cache the callable together with whether it takes `ctx`.
_resolved: dict[str, tuple[Callable[..., Any], bool]] = {}
_resolved_lock = threading.Lock()
#: Why a name is missing from a module imported before (the file gained it since).
NEW_CODE = ("not in the code this process loaded: restart the worker to load new code "
            "(or run it with --reload)")


class ImportProblem(Exception):
    """The `module:function` path of a call job cannot be resolved."""


class CallResult(NamedTuple):
    """What the call reports back; the call kind (:mod:`cronsvc.kinds.call`) makes it a
    Result. (A named tuple: one is made per call, and most are :data:`NOTHING`.)"""

    ok: bool
    output: str = ""
    error: str | None = None


#: A call that printed nothing and returned None: most calls, one result for them all.
NOTHING = CallResult(ok=True)


def locate(path: str) -> Any:
    """The object ``module:attribute`` names, imported (ImportProblem if it cannot be)."""
    module_name, sep, attr_path = path.partition(":")
    if not sep or not module_name or not attr_path:
        raise ImportProblem(f"cannot import {path}: expected 'module:function'")
    loaded = module_name in sys.modules
    try:
        obj: Any = importlib.import_module(module_name)
        for part in attr_path.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError) as exc:
        why = NEW_CODE if loaded and isinstance(exc, AttributeError) else exc
        raise ImportProblem(f"cannot import {path}: {why}") from exc
    except Exception as exc:  # the module's own code raised while importing
        raise ImportProblem(f"cannot import {path}: {type(exc).__name__}: {exc}") from exc
    return obj


def resolve(path: str) -> tuple[Callable[..., Any], bool]:
    """Import `module:function` once; return the callable and whether it takes `ctx`."""
    hit = _resolved.get(path)  # a dict read is atomic: no lock on the hot path
    if hit is not None:
        return hit
    # Imported outside the lock: a slow import must not hold up other jobs, and Python's
    # own import lock keeps concurrent imports of one module safe.
    obj = locate(path)
    if not callable(obj):
        raise ImportProblem(f"{path} is not callable (type {type(obj).__name__})")
    entry = (obj, _takes_ctx(obj))
    with _resolved_lock:
        _resolved.setdefault(path, entry)
    return entry


def is_async(path: str) -> bool:
    """Whether the target is an ``async def`` function (or a partial of one), to be
    awaited on the worker's loop; False for a target that does not import (its run
    says why)."""
    try:
        fn, _ = resolve(path)
    except ImportProblem:
        return False
    return inspect.iscoroutinefunction(fn)


def _takes_ctx(fn: Callable[..., Any]) -> bool:
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):  # some builtins have no signature
        return False
    param = params.get("ctx")
    return param is not None and param.kind in (
        inspect.Parameter.POSITIONAL_OR_KEYWORD,
        inspect.Parameter.KEYWORD_ONLY,
    )


def start_call(job: Any, ctx: FireContext, stop: threading.Event, out: Kept | None = None
               ) -> tuple[threading.Event, list]:
    """Start the job's callable in a daemon thread; what it prints goes to ``out``.

    Returns an event set when the call has finished and a one-slot list that
    then holds its :class:`CallResult`.
    """
    done = threading.Event()
    box: list[CallResult] = []

    def target() -> None:
        # A new thread starts with an empty context: what is set in it is private to it.
        tracecontext.attach(ctx.trace)  # the thread's own context, gone with it
        try:
            box.append(call_here(job, ctx, stop, out))
        finally:
            done.set()

    thread = threading.Thread(target=target, name=f"cronsvc-call-{ctx.fire_id}", daemon=True)
    thread.start()
    return done, box


def call_here(job: Any, ctx: FireContext, stop: threading.Event, given: Kept | None = None
              ) -> CallResult:
    """Run the job's callable in this thread and return its result; what it prints goes
    to ``given`` (a keeper of the job's size if None).

    For jobs without a timeout: nothing would stop them early, and a thread of
    their own costs more than a no-op call. ``stop`` still reaches stopping().
    """
    out = given or kept_of(job)
    hit = _resolved.get(job.call)  # resolve(), without its call once resolved
    if hit is None:
        try:
            hit = resolve(job.call)
        except ImportProblem as exc:
            return CallResult(ok=False, error=str(exc))
    return call_with(hit[0], hit[1], job.args, job.kwargs, ctx, stop, out)


def call_with(fn: Callable[..., Any], takes_ctx: bool, args: tuple[Any, ...],
              kwargs: dict[str, Any], ctx: FireContext | Deferred, stop: threading.Event,
              out: Kept) -> CallResult:
    """:func:`call_here` of a callable resolved before (:func:`resolve`): ``fn(*args,
    **kwargs)`` in this thread, ``ctx`` given as ``ctx`` if it ``takes_ctx`` (a
    :class:`Deferred` context is made when asked for: ``current()``)."""
    if takes_ctx:
        ctx = made(ctx)  # type: ignore[assignment]
        kwargs = {**kwargs}
        kwargs.setdefault("ctx", ctx)
    install()
    # The fire, its stop and its output are the current ones for the call only: one
    # context variable, set and reset once (cronsvc.run.within). The InRun made as a
    # tuple at once: a named tuple's own __new__ is a Python function (0.3 µs a fire).
    token = RUN.set(_made(InRun, (ctx, stop, out)))
    try:
        result = fn(*args, **kwargs)
    except BaseException as exc:  # SystemExit and friends must not escape a worker thread
        return raised(exc, out)
    finally:
        RUN.reset(token)
    if result is None:
        # returned(None, out), without its call for a call that printed nothing either
        return returned(result, out) if out._total else NOTHING
    if inspect.iscoroutine(result):
        return _await_here(result, made(ctx), stop, out)  # type: ignore[arg-type]
    return returned(result, out)


_made = tuple.__new__


def _await_here(coro: Any, ctx: FireContext, stop: threading.Event, out: Kept) -> CallResult:
    """Await a coroutine a sync target returned on the worker's loop, this thread waiting
    for it; ``stop`` cancels it."""
    done = threading.Event()
    box: list[CallResult] = []

    def ended(how: How, value: Any, exc: BaseException | None) -> None:
        box.append(settled(how, value, exc, out))
        done.set()

    task = Awaited(coro, ctx, out, None, ended)
    while not done.wait(SLICE):
        if stop.is_set():
            task.cancel()
            done.wait()
    return box[0]


def start_awaited(job: Any, ctx: FireContext, deadline: float | None,
                  ended: Callable[[How, CallResult], None],
                  out: Kept | None = None) -> Callable[[], None]:
    """Start an ``async def`` target as a task on the worker's loop; ``ended`` is told how
    it ended, on the loop's thread; what it prints goes to ``out`` (a keeper of the job's
    size if None). Returns what cancels it (from any thread)."""
    out = out or kept_of(job)
    try:
        fn, takes_ctx = resolve(job.call)
        kwargs = dict(job.kwargs)
        if takes_ctx:
            kwargs.setdefault("ctx", ctx)
        coro = fn(*job.args, **kwargs)  # an async def runs nothing until awaited
    except ImportProblem as exc:
        ended("done", CallResult(ok=False, error=str(exc)))
        return lambda: None
    except Exception as exc:  # arguments that do not fit its signature
        ended("done", raised(exc, out))
        return lambda: None
    task = Awaited(coro, ctx, out, deadline,
                   lambda how, value, exc: ended(how, settled(how, value, exc, out)))
    return task.cancel


def settled(how: How, value: Any, exc: BaseException | None, out: Kept) -> CallResult:
    """What an awaited call reports: as a sync call for "done"; what it printed otherwise."""
    if how != "done":
        return CallResult(ok=False, output=kept(out, ""), error=how)
    return returned(value, out) if exc is None else raised(exc, out)


def raised(exc: BaseException, out: Kept) -> CallResult:
    """A call that raised: what it printed, then the traceback."""
    tb = "".join(traceback.format_exception(exc))
    return CallResult(ok=False, output=kept(out, tb),
                      error=f"{type(exc).__name__}: {exc}")


def returned(value: Any, out: Kept) -> CallResult:
    """A call that returned: what it printed, then the repr of what it returned."""
    if value is None:  # most calls: then, most often, nothing printed either
        output = out.text()
        return CallResult(ok=True, output=output) if output else NOTHING
    text = repr(value)
    if len(text) > OUTPUT_CAP:
        text = text[: OUTPUT_CAP - 3] + "..."
    output = kept(out, text)
    return CallResult(ok=True, output=output) if output else NOTHING
