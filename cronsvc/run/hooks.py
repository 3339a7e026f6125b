"""What a worker does around every run, whatever its kind: dead-man pings
(:class:`cronsvc.notify.pings.Pinger`) and traces (:class:`cronsvc.metrics.traces.Traces`).
Each is one :class:`RunHook`; the worker calls them through :class:`Hooks`, in order,
before and after each run and once its result is recorded, the way dramatiq's middleware
wraps each message.

Chains and auto-pause are not hooks: they are written by the scripts that record a run's
end (``lua/ack-8+.lua``, ``lua/fail-14.lua``), in the same step as its history, so a
worker that dies between the two cannot run one without the other. Metrics count the
result once it is recorded, in the worker's results thread.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any, Protocol

from cronsvc.run.context import FireContext
from cronsvc.run.outcome import Outcome

log = logging.getLogger(__name__)


class RunHook(Protocol):
    """Told of each run of a worker: when it starts and how it ended. A hook must not
    hold up the run: one that talks to the network queues its work for a thread."""

    def started(self, job: Any, ctx: FireContext) -> FireContext | None:
        """A run begins; the context it runs with, if the hook adds to it (its trace)."""

    def ended(self, job: Any, ctx: FireContext, outcome: Outcome) -> None: ...

    def recorded(self, fire_id: str, attempt: int) -> None:
        """The run's result is recorded in Redis (or could not be, or it had none)."""

    def close(self) -> None:
        """The worker stops: finish what is queued, briefly."""

    def wants(self, job: Any) -> bool:
        """Whether runs of ``job`` concern the hook at all (False: it is not told of them,
        which saves every fire of a job without pings its calls)."""


class Hooks:
    """A worker's hooks, called in order; one that raises is logged, and the run and the
    other hooks go on."""

    def __init__(self, hooks: Sequence[RunHook]) -> None:
        self.hooks = tuple(hooks)

    def wanted(self, job: Any) -> bool:
        """Whether some hook wants to be told of runs of ``job`` (else the worker skips
        :meth:`started`, :meth:`ended` and :meth:`recorded` for them)."""
        return any(hook.wants(job) for hook in self.hooks)

    def started(self, job: Any, ctx: FireContext) -> FireContext:
        """Tell each hook; the context the run goes on with."""
        for hook in self.hooks:
            try:
                ctx = hook.started(job, ctx) or ctx
            except Exception:
                log.exception("%s: hook %s failed at the start", ctx.fire_id,
                              type(hook).__name__)
        return ctx

    def ended(self, job: Any, ctx: FireContext, outcome: Outcome) -> None:
        for hook in self.hooks:
            try:
                hook.ended(job, ctx, outcome)
            except Exception:
                log.exception("%s: hook %s failed at the end", ctx.fire_id,
                              type(hook).__name__)

    def recorded(self, fire_id: str, attempt: int) -> None:
        for hook in self.hooks:
            try:
                hook.recorded(fire_id, attempt)
            except Exception:
                log.exception("%s: hook %s failed once its result was recorded", fire_id,
                              type(hook).__name__)

    def close(self) -> None:
        for hook in self.hooks:
            try:
                hook.close()
            except Exception:
                log.exception("hook %s failed to close", type(hook).__name__)
