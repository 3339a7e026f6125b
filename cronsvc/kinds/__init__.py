"""Kinds of job: what a fire runs. Each kind is one module, registered in :data:`KINDS`.

A kind (:class:`cronsvc.kinds.kind.Kind`) provides its keys in a job with their located
errors, how a fire runs and is stopped, what it reports, how the API and the dashboard
show it and what ``cronsvc validate`` checks of it. Adding one is a module, its entry in
:data:`KINDS` and its fields in :class:`KindFields`: the job file's models, the web and
validate ask the table, and the worker runs every kind through :func:`execute`.

Why a layer between ``config`` and ``run``: a kind's model and its runner are one module,
so the job file's models (config, above) import the kinds, and the kinds import the means
of running any fire (``run``, below: the fire's context, outcomes, process groups,
calling a function, the watchdog), which never ask a job's kind. The one dispatch on
it, :func:`execute`, is here, over the table. The other split, a model half in config
and a runner half in run, would register each kind twice. Like ``run`` and ``config``,
a kind knows neither Redis nor the CLI: what a fire runs is the same whoever claimed it.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable
from typing import Any

from cronsvc.clock import SYSTEM, Clock, monotonic
from cronsvc.kinds import arq, call, celery, command, dramatiq, http, rq
from cronsvc.kinds.kind import Kind
from cronsvc.run import tracecontext
from cronsvc.run.context import FireContext
from cronsvc.run.dispatch import Outcomes
from cronsvc.run.made import made
from cronsvc.run.outcome import Guard, Outcome, Result, Stop
from cronsvc.run.output import Feed, kept_of

#: Every kind, by the key that makes a job of it, in the order messages name them.
log = logging.getLogger(__name__)

KINDS: dict[str, Kind] = {"command": command.KIND, "call": call.KIND, "http": http.KIND,
                          "celery": celery.KIND, "rq": rq.KIND, "dramatiq": dramatiq.KIND,
                          "arq": arq.KIND}


# Pydantic orders a model's fields base-most first, so the kinds are listed last to first:
# a job's keys keep the order of KINDS (and so do the errors of one line).
class KindFields(arq.ArqFields, dramatiq.DramatiqFields, rq.RqFields, celery.CeleryFields,
                 http.HttpFields, call.CallFields, command.CommandFields):
    """The keys of every kind: a base of :class:`cronsvc.config.models.Job`."""


def kinds_named() -> str:
    """Every kind, with what it is, for a message: ``command (a program to run), ...``."""
    return ", ".join(kind.hint for kind in KINDS.values())


def kind_problem(keys: Iterable[str]) -> str | None:
    """Why a job setting these kinds' ``keys`` is not runnable, or None if it is (one)."""
    given = set(keys)
    found = [key for key in KINDS if key in given]
    if len(found) > 1:
        return f"set either {' or '.join(found)}, not {'both' if len(found) == 2 else 'several'}"
    if not found:
        return f"set what it runs, one of: {kinds_named()}"
    return None


def execute(
    job: Any, ctx: FireContext, cancel: threading.Event | None = None, clock: Clock = SYSTEM,
    guard: Guard | None = None, outcomes: Outcomes | None = None, feed: Feed | None = None,
) -> Outcome:
    """Run `job` (a `cronsvc.config.models.Job`) once, as its kind runs it.

    Returns when the job has finished, timed out (`job.timeout` seconds) or `cancel` was
    set; the status says which. A command's output is fed to ``feed`` as it comes. Never
    raises: every problem becomes a "failed" outcome.
    """
    started_ms = clock.now_ms()
    t0 = monotonic()
    cancel = cancel if cancel is not None else threading.Event()
    deadline = None if job.timeout is None else t0 + job.timeout
    # A traced fire runs in its span's context: what it calls in this thread (a call, an
    # instrumented client sending its message or request) is a child of it.
    token = tracecontext.attach(ctx.trace) if ctx.trace else None
    try:
        if cancel.is_set():
            result = Result("cancelled", error="cancelled before start")
        elif deadline is None and (kind := KINDS[job.kind]).runs_untimed:
            result = kind.run_untimed(job, ctx, cancel, kept_of(job, feed))  # no Stop made
        else:
            # made(Stop, ...) without its call: one per fire
            stop = _new(Stop)
            stop.__dict__.update(cancel=cancel, timeout=job.timeout, deadline=deadline,
                                 guard=guard, outcomes=outcomes, output=kept_of(job, feed))
            result = KINDS[job.kind].run(job, ctx, stop)
    except Exception as exc:  # a worker thread must get an outcome, whatever went wrong
        result = crashed(exc)
    finally:
        if token is not None:
            tracecontext.detach(token)
    duration_ms = int((monotonic() - t0) * 1000)
    return outcome_of(result, started_ms, duration_ms)


def crashed(exc: Exception) -> Result:
    """What a run reports that went wrong around its job (not in it): failed, and why."""
    return Result("failed", error=f"{type(exc).__name__}: {exc}")


def outcome_of(result: Result, started_ms: int, duration_ms: int) -> Outcome:
    """What the worker records of a run of a kind that reported ``result``."""
    # made(Outcome, ...) without its call, one per fire. Every field is in the instance's
    # dict, in their order, as __init__ leaves them: a field left to the class (its
    # default) or stored item by item costs each later read of the outcome more.
    outcome = _new(Outcome)
    outcome.__dict__.update(status=result.status, started_ms=started_ms,
                            duration_ms=duration_ms, exit_code=result.exit_code,
                            output=result.output, error=result.error)
    return outcome


_new = object.__new__


def runs_async(job: Any) -> bool:
    """Whether fires of `job` run on the worker's event loop (:func:`launch`), holding no
    slot thread while they wait, rather than through :func:`execute`."""
    return KINDS[job.kind].runs_async(job)


def starts_processes(job: Any) -> bool:
    """Whether fires of `job` start processes, to be held through :func:`execute`'s
    ``guard`` (a job of another kind needs none)."""
    return KINDS[job.kind].starts_processes


def launch(
    job: Any, ctx: FireContext, cancel: threading.Event, done: Callable[[Outcome], None],
    clock: Clock = SYSTEM, feed: Feed | None = None,
) -> Callable[[], None]:
    """Start a fire of a job that :func:`runs_async` on the worker's loop; `done` is told
    its outcome once, on the loop's thread. What it prints is fed to ``feed`` as it comes.
    Returns what stops it early (`cancel` is only read here: the caller calls the returned
    function when it sets it)."""
    started_ms = clock.now_ms()
    t0 = monotonic()

    def finished(result: Result) -> None:
        done(outcome_of(result, started_ms, int((monotonic() - t0) * 1000)))

    if cancel.is_set():
        finished(Result("cancelled", error="cancelled before start"))
        return lambda: None
    deadline = None if job.timeout is None else t0 + job.timeout
    try:
        return KINDS[job.kind].start(job, ctx, made(
            Stop, cancel=cancel, timeout=job.timeout, deadline=deadline, guard=None,
            outcomes=None, output=kept_of(job, feed)), finished)
    except Exception as exc:  # the worker must get an outcome, whatever went wrong
        finished(crashed(exc))
        return lambda: None


def prepare(jobs: Iterable[Any]) -> threading.Thread:
    """Make ahead, in a daemon thread, what the first fire of each of ``jobs`` would make
    (:meth:`cronsvc.kinds.kind.Kind.prepare`: a queue library's client and connection),
    so that it is not paid in a fire's lag. A job that cannot be prepared (its broker
    down, its library missing) is left to its first fire, which says what went wrong."""

    def work() -> None:
        for job in jobs:
            try:
                KINDS[job.kind].prepare(job)
            except Exception as exc:
                log.info("%s: not prepared ahead of its first fire: %s: %s", job.name,
                         type(exc).__name__, str(exc).splitlines()[0] if str(exc) else "")

    thread = threading.Thread(target=work, name="cronsvc-prepare", daemon=True)
    thread.start()
    return thread
