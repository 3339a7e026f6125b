"""What a kind of job provides: :class:`Kind`, which each module of :mod:`cronsvc.kinds`
fills in, and :class:`Fields`, the base of its keys in a job.

A method is given the whole job (a :class:`cronsvc.config.models.Job`, whose class this
layer cannot name): its kind's own fields and the ones every job has (``name``, ``env``,
``cwd``, ``timeout``...).
"""

from __future__ import annotations

import json
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from typing import Annotated, Any, ClassVar, NamedTuple

from pydantic import BaseModel, BeforeValidator, ConfigDict

from cronsvc.run.context import FireContext
from cronsvc.run.outcome import Result, Stop
from cronsvc.run.output import Kept


def as_text(value: object) -> object:
    """A YAML scalar as the text it was written as: YAML reads ``8080`` and ``true`` as int
    and bool, an argv or an environment wants the words."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value) if isinstance(value, int | float) else value


Text = Annotated[str, BeforeValidator(as_text)]


class Target(NamedTuple):
    """What ``cronsvc validate --imports`` imports for a job, ``module:attribute``, and
    what it must be: callable, or (``has``) an object with that attribute."""

    path: str
    has: str | None = None


class Fields(BaseModel):
    """A kind's keys in a job, with their checks. The job file writes them flat, beside
    ``cron`` and ``retries``: these models are bases of :class:`cronsvc.config.models.Job`
    (through :class:`cronsvc.kinds.KindFields`), never a section of their own."""

    model_config = ConfigDict(frozen=True, extra="forbid")


class Kind(ABC):
    """One kind of job: how it is written, run, reported and shown.

    A kind is named by its ``key``: a job is of the kind whose key it sets (``command:``,
    ``call:``), and of exactly one. The other keys of ``fields`` are its options.
    """

    #: The key that makes a job of this kind.
    key: ClassVar[str]
    #: This kind in the error for a job that sets no kind: ``command (a program to run)``.
    hint: ClassVar[str]
    #: Its keys in a job, with the checks of each (``file:line: jobs.x.KEY: ...``).
    fields: ClassVar[type[Fields]]
    #: Its keys that cannot have a default (under ``defaults:``): what a job is.
    per_job: ClassVar[frozenset[str]]
    #: Whether its runs start processes, which the worker's watchdog then holds (through
    #: the run's ``guard``): a run of another kind is given no guard.
    starts_processes: ClassVar[bool] = False
    #: Whether a run of a job without a timeout needs of its :class:`Stop` only its
    #: ``cancel`` and its ``output``: then it runs through :meth:`run_untimed`, and no Stop
    #: is made for it (one a fire: most fires of most jobs have no timeout).
    runs_untimed: ClassVar[bool] = False

    def problem(self, job: Any) -> str | None:
        """Why ``job``, of this kind or another, misuses this kind's options (checked once
        the job's keys are valid one by one), or None."""
        return None

    @abstractmethod
    def run(self, job: Any, ctx: FireContext, stop: Stop) -> Result:
        """Run one fire of ``job``, and what it reports: status, exit code or error,
        output (its tail). Returns when it is done, or once ``stop`` says it must end
        (its timeout, a cancel, a lost lease, a shutdown), as far as this kind can stop
        it; may raise (the executor reports the exception as a failure)."""

    def run_untimed(self, job: Any, ctx: FireContext, cancel: threading.Event,
                    output: Kept) -> Result:
        """:meth:`run` of a job without a timeout, for a kind that :attr:`runs_untimed`:
        ``cancel`` and ``output`` are its Stop's."""
        raise NotImplementedError(f"{self.key} jobs run through run()")

    def runs_async(self, job: Any) -> bool:
        """Whether fires of ``job`` run as tasks on the worker's event loop (through
        :meth:`start`) instead of in one of its slot threads (through :meth:`run`)."""
        return False

    def start(self, job: Any, ctx: FireContext, stop: Stop,
              done: Callable[[Result], None]) -> Callable[[], None]:
        """Start one fire of a job that :meth:`runs_async`, on the worker's loop, and
        return what stops it (from any thread: a cancel, a lost lease, a shutdown).
        ``done`` is told its result once, on the loop's thread; it does not block."""
        raise NotImplementedError(f"{self.key} jobs do not run on the event loop")

    @abstractmethod
    def shown(self, job: Any) -> dict[str, Any]:
        """This kind's fields of ``job`` as the API's definition of it shows them, in
        JSON's types (no secret: the API shows every job to every reader)."""

    def text(self, field: str, value: Any) -> str:
        """How the dashboard writes one of the values :meth:`shown` gives."""
        if isinstance(value, bool):
            return "true" if value else "false"
        return json.dumps(value) if isinstance(value, list | dict) else str(value)

    def prepare(self, job: Any) -> None:
        """Make ahead, once per worker, what a fire of ``job`` would make on first use (a
        queue library's import, its client, a connection), so that the first fire does
        not pay for it: importing a queue library takes 150-200 ms. Called in a thread of
        its own when the worker loads its job file; may raise (the fire that follows
        makes it, and reports what goes wrong). Most kinds have nothing to make."""
        return None

    def imports(self, job: Any) -> Mapping[str, Target]:
        """``key -> target`` for what ``cronsvc validate --imports`` imports and checks
        (the key locates its error)."""
        return {}

    def warnings(self, job: Any) -> list[tuple[str, str]]:
        """``(key, message)`` for what is valid but likely wrong or unsafe in ``job``,
        told by ``cronsvc validate``; a key inside one of the kind's mappings is dotted
        (``http.url``)."""
        return []
