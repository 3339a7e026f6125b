"""Jobs declared in Python: the :func:`job` decorator, and the record of what it declared.

``@cronsvc.job("0 9 * * *", timezone="Europe/Berlin")`` on a function declares a ``call``
job of it; on a task of a job queue (a Celery task: the object ``@app.task`` returns; a
dramatiq actor) a dispatching job that sends it there (see :data:`STACKED`). RQ and arq
run plain functions, which nothing tells from a ``call`` target: ``via="rq"`` or
``via="arq"`` says where they go. The decorator returns what it was given, unchanged,
and checks nothing: a declaration is data, the job file's fields and the place it was
written, that the job file's own checks judge once the modules that the file's
``discover:`` names are collected (:mod:`cronsvc.config.discover`). A problem found here
(a value no job file could hold, a function a worker cannot import) is recorded with the
declaration, never raised: the module is also imported by the user's own processes (a
Celery worker, a web app), which a cronsvc declaration must not break.

This module is imported by user code and by the collecting child process: the standard
library only.
"""

from __future__ import annotations

import inspect
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from pathlib import Path
from types import FrameType
from typing import Any, TypeVar, overload

F = TypeVar("F")


@dataclass
class Declaration:
    """One decorator's job: its name, its fields as the job file writes them (JSON's
    types), where it was written (``proj/jobs.py:12``, and the file's full path), and the
    problems found in it, each ``(field, message)``."""

    name: str
    fields: dict[str, Any]
    place: str
    file: str
    problems: list[tuple[str, str]] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        return {"name": self.name, "fields": self.fields, "place": self.place,
                "file": self.file, "problems": self.problems}


#: Every declaration this process has made, in order. The collecting child reads it after
#: each import; anywhere else it is never read (a worker importing a job's module to run
#: it declares its jobs again, harmlessly).
DECLARED: list[Declaration] = []


@dataclass(frozen=True)
class Stacked:
    """How a job is declared on what a job queue runs: ``fits`` tells it is one, ``kind``
    is the key of the dispatching kind whose job sends it, ``target`` gives that key's
    mapping (with the decorator's options ``options``, moved out of the job's fields into
    it), ``name`` the job's default name. ``named`` entries (a plain function, for RQ or
    arq) are taken only when ``via=`` names their kind: anything else fits them too."""

    kind: str
    fits: Callable[[Any], bool]
    target: Callable[[Any, dict[str, Any]], dict[str, Any]]
    name: Callable[[Any], str]
    options: tuple[str, ...]
    named: bool = False


class Undeclarable(ValueError):
    """What a declaration cannot be made of: its field, and why."""


@overload
def job(cron: F, /) -> F: ...


@overload
def job(cron: str | None = None, /, **fields: Any) -> Callable[[F], F]: ...


def job(cron: Any = None, /, **fields: Any) -> Any:
    """Declare a job: ``@cronsvc.job("0 9 * * *", overlap="forbid")`` above a function,
    or above a job queue's decorator (``@app.task``, ``@dramatiq.actor``) to send its task;
    ``via="rq"`` or ``via="arq"`` sends the function to RQ or arq. Any field of a job
    in the file may be given (``every="5m"`` instead of a cron, ``retries``, ``pool``,
    ``skip``, ``on_success``...); ``name`` names the job (default: the function's name,
    ``_`` written ``-``). The job exists for a fleet whose job file names the module under
    ``discover:``. ``@cronsvc.job`` alone declares a job that runs only when triggered."""
    caller = sys._getframe(1)
    if callable(cron) and not isinstance(cron, str):
        return _declare(cron, {}, caller)
    twice = cron is not None and "cron" in fields
    if cron is not None and not twice:
        fields = {"cron": cron, **fields}

    def decorate(obj: F) -> F:
        return _declare(obj, fields, caller, ["cron"] if twice else [])

    return decorate


def _declare(obj: F, given: dict[str, Any], caller: FrameType, twice: list[str] | None = None
             ) -> F:
    fields = dict(given)
    name = fields.pop("name", None)
    file = caller.f_code.co_filename
    decl = Declaration("", {}, f"{shown_path(file)}:{caller.f_lineno}", file,
                       [(key, "given twice: as the first argument and by name")
                        for key in twice or ()])
    default = str(getattr(obj, "__name__", ""))
    try:
        stacked = stacked_for(obj, fields.pop("via", None))
        if stacked is not None:
            default = stacked.name(obj)
            moved = {k: fields.pop(k) for k in stacked.options if k in fields}
            fields[stacked.kind] = stacked.target(obj, moved)
            decl.problems += [(key, f"not an option of {stacked.kind} jobs, which take "
                                    f"{', '.join(stacked.options)}")
                              for key in WHERE_SENT if key in fields]
        else:
            fields["call"] = call_path(obj)
    except Undeclarable as exc:
        decl.problems.append((str(exc.args[0]), str(exc.args[1])))
    default = default or "undeclarable"
    decl.name = str(name) if name is not None else job_name(default)
    for key, value in fields.items():
        try:
            decl.fields[key] = plain(value)
        except Undeclarable as exc:
            decl.problems.append((key, str(exc.args[1])))
    DECLARED.append(decl)
    return obj


def stacked_for(obj: Any, via: Any) -> Stacked | None:
    """The entry of :data:`STACKED` that declares the job of ``obj``: the one ``via``
    names, else the first (not ``named``) that fits; None for a ``call`` job."""
    if via is None:
        return next((s for s in STACKED if not s.named and s.fits(obj)), None)
    kinds = [s.kind for s in STACKED]
    stacked = next((s for s in STACKED if s.kind == via), None)
    if stacked is None:
        raise Undeclarable("via", f"unknown job queue {via!r}; expected one of "
                                  f"{', '.join(kinds)} (without via, a function is a call job)")
    if not stacked.fits(obj):
        raise Undeclarable("via", f"via={via!r} is for {VIA_FITS[stacked.kind]}, not an "
                                  f"object of type {type(obj).__name__}")
    return stacked


def job_name(name: str) -> str:
    """The job's name for a function's: ``send_digest`` -> ``send-digest`` (leading and
    trailing ``_`` dropped: a job's name starts with a letter or a digit)."""
    return re.sub("_+", "-", name.strip("_"))


def call_path(obj: Any, where: str = "call") -> str:
    """``module:qualname`` a worker imports ``obj`` by; Undeclarable (of the field
    ``where``) if it cannot."""
    module, qualname = getattr(obj, "__module__", None), getattr(obj, "__qualname__", None)
    if not callable(obj) or not module or not qualname:
        raise Undeclarable(where, f"cannot declare a job on a {type(obj).__name__}: "
                           "expected a function")
    if module == "__main__":
        raise Undeclarable(where, f"{qualname} is in the script being run (__main__), which "
                           "a worker cannot import: declare it in a module")
    if "<locals>" in qualname:
        raise Undeclarable(where, f"{module}:{qualname} is defined inside a function: "
                           "a worker cannot import it; declare it at module level")
    return f"{module}:{qualname}"


def plain(value: Any) -> Any:
    """``value`` in JSON's types as the job file would write it: a datetime or date in ISO
    8601, a timedelta in seconds; Undeclarable for what a job file cannot hold."""
    if value is None or isinstance(value, str | int | float | bool):
        return value
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, timedelta):
        return value.total_seconds()
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    if isinstance(value, dict) and all(isinstance(k, str) for k in value):
        return {k: plain(v) for k, v in value.items()}
    raise Undeclarable("", f"a value of type {type(value).__name__} cannot be written in a "
                       "job file (strings, numbers, lists, mappings, datetime and timedelta "
                       "can)")


def shown_path(file: str) -> str:
    """``file`` relative to the import path it was found on (``proj/jobs.py``), as the
    same on every host; the path as given if it is on none."""
    try:
        path = Path(file).resolve()
    except OSError:
        return file
    best: Path | None = None
    for entry in sys.path:
        try:
            root = Path(entry or ".").resolve()
        except OSError:
            continue
        if path.is_relative_to(root) and (best is None or len(root.parts) > len(best.parts)):
            best = root
    return file if best is None else path.relative_to(best).as_posix()


# -- stacked on a job queue's task ---------------------------------------------------------
def _is_celery_task(obj: Any) -> bool:
    """What ``@app.task`` returns: a task with its name, its app and ``delay``."""
    return all(hasattr(obj, a) for a in ("name", "app", "delay", "apply_async")) \
        and isinstance(getattr(obj, "name", None), str)


def _celery_target(task: Any, options: dict[str, Any]) -> dict[str, Any]:
    target = {"task": task.name, **options}
    if "app" not in options and "broker" not in options:
        # The module the task's function is written in first: it holds (or imports) its
        # app, whatever other modules happen to import the app as well.
        home = getattr(getattr(task, "run", None), "__module__", None)
        where = attribute_path(task.app, home or getattr(task, "__module__", None))
        if where is None:
            raise Undeclarable("celery.app", f"cannot tell which module holds the Celery app "
                               f"of task {task.name}: give app='module:attribute' or "
                               "broker=URL")
        target["app"] = where
    return target


def attribute_path(obj: Any, first: str | None) -> str | None:
    """``module:attribute`` of a module imported now that holds ``obj`` (the module
    ``first`` before the others), or None."""
    names = [first] if first else []
    names += sorted(n for n in list(sys.modules) if n != first)
    for name in names:
        module = sys.modules.get(name)
        try:
            attrs = list(vars(module).items()) if module is not None else []
        except TypeError:
            continue
        for attr, value in attrs:
            if value is obj and not attr.startswith("_"):
                return f"{name}:{attr}"
    return None


def _last_part(task: Any) -> str:
    return str(task.name).rsplit(".", 1)[-1]


def _is_dramatiq_actor(obj: Any) -> bool:
    """What ``@dramatiq.actor`` returns: an actor with its name, its queue and its broker
    (told by its attributes, so dramatiq need not be installed to ask)."""
    return all(hasattr(obj, a) for a in ("actor_name", "queue_name", "send", "broker")) \
        and isinstance(getattr(obj, "actor_name", None), str)


def _dramatiq_target(actor: Any, options: dict[str, Any]) -> dict[str, Any]:
    # A broker object does not say its URL in any one way: RedisBroker keeps a client,
    # RabbitmqBroker its connection parameters, a stub or a custom broker neither.
    if "broker" not in options:
        raise Undeclarable("dramatiq.broker", f"give broker= the URL of actor "
                           f"{actor.actor_name}'s broker (redis://, amqp://, or "
                           "'${VAR}' to read it from the worker's environment): it cannot "
                           "be read back from the broker object")
    queue = options.pop("queue", actor.queue_name)
    if queue != actor.queue_name:
        raise Undeclarable("dramatiq.queue", f"actor {actor.actor_name} reads queue "
                           f"{actor.queue_name!r}, where its messages go: give the queue to "
                           "@dramatiq.actor(queue_name=...)")
    return {"actor": actor.actor_name, "queue": actor.queue_name, **options}


def _actor_name(actor: Any) -> str:
    return str(actor.actor_name).rsplit(".", 1)[-1]


def _is_function(obj: Any) -> bool:
    """Anything a job queue may run by its name: a function, or a callable with one."""
    return callable(obj) and isinstance(getattr(obj, "__qualname__", None), str) \
        and not any(s.fits(obj) for s in STACKED if not s.named)


def _rq_target(fn: Any, options: dict[str, Any]) -> dict[str, Any]:
    # RQ's worker imports a dotted name: the module, then attributes down to the function.
    return {"func": call_path(fn, "rq.func").replace(":", "."), **options}


def _arq_target(fn: Any, options: dict[str, Any]) -> dict[str, Any]:
    if not inspect.iscoroutinefunction(fn):
        raise Undeclarable("arq.function", f"{fn.__qualname__} is not async: arq runs "
                           "'async def f(ctx, ...)' functions")
    if "redis" not in options:
        raise Undeclarable("arq.redis", "give redis= the URL of arq's Redis "
                           "(redis://..., or '${VAR}' to read it from the worker's "
                           "environment)")
    # arq finds a function by the name it was registered under: its __qualname__, which
    # cronsvc.contrib.arq.guarded keeps.
    return {"function": fn.__qualname__, **options}


def _own_name(fn: Any) -> str:
    return str(getattr(fn, "__name__", ""))


_SENT = ("queue", "args", "kwargs", "options", "wait")
#: Where a job queue's options say its tasks go: none of them is a job's own field.
WHERE_SENT = ("app", "broker", "redis")

#: The job queues a job may be declared for, tried in turn; the first that fits makes the
#: job. One entry per dispatching kind (:data:`cronsvc.kinds.KINDS`).
STACKED: tuple[Stacked, ...] = (
    Stacked("celery", _is_celery_task, _celery_target, _last_part, ("app", "broker", *_SENT)),
    Stacked("dramatiq", _is_dramatiq_actor, _dramatiq_target, _actor_name, ("broker", *_SENT)),
    Stacked("rq", _is_function, _rq_target, _own_name, ("redis", *_SENT), named=True),
    Stacked("arq", _is_function, _arq_target, _own_name, ("redis", *_SENT), named=True),
)
#: What ``via=`` of each kind is written on, for the problem of a mismatch.
VIA_FITS = {"celery": "a Celery task (@app.task)", "dramatiq": "a dramatiq actor "
            "(@dramatiq.actor)", "rq": "a function RQ runs", "arq": "an arq function"}
