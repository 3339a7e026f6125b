"""``celery``: send a Celery task with Celery's own client, its task id the fire id.

```yaml
celery: {task: proj.tasks.digest, app: "proj.celery:app", queue: reports,
         args: [1], kwargs: {a: 2}, options: {priority: 5}}
```

``app`` names the user's Celery app (imported by the worker, as a ``call`` target is),
or ``broker`` gives a broker URL (``${VAR}`` filled from the worker's environment when
sending) and the task is sent by name with ``send_task``, so nothing of the user's code
needs importing. On AMQP the broker confirms each message (publisher confirms) before
the fire counts as sent. The fire's delivery travels in the message's headers
(:meth:`cronsvc.run.dispatch.Delivery.headers`); the task's base class
:class:`cronsvc.contrib.celery.Guarded` runs it once and reports its outcome.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, field_validator, model_validator

from cronsvc.kinds.dispatching import Dispatching
from cronsvc.kinds.kind import Fields, Target
from cronsvc.run.calls import locate
from cronsvc.run.context import FireContext
from cronsvc.run.dispatch import Delivery, dispatch
from cronsvc.run.outcome import Result, Stop
from cronsvc.secrets import expand

#: What `pip install` gives a worker that lacks the library.
EXTRA = "pip install 'cronsvc[celery]'"


class CeleryTarget(BaseModel):
    """The task a fire sends, and where."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    task: str
    app: str | None = None
    broker: str | None = None
    queue: str | None = None
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = {}
    options: dict[str, Any] = {}
    #: Wait for the outcome the task's guard reports (False: ok once the broker took it).
    wait: bool = True

    @field_validator("app")
    @classmethod
    def _app(cls, value: str | None) -> str | None:
        if value is not None and ":" not in value:
            raise ValueError("expected 'package.module:attribute', the Celery app")
        return value

    @model_validator(mode="after")
    def _one_source(self) -> CeleryTarget:
        if (self.app is None) == (self.broker is None):
            raise ValueError("set either app (the Celery app, 'module:attribute') or broker "
                             "(a broker URL)")
        taken = {"task_id", "headers", "queue", "args", "kwargs"} & set(self.options)
        if taken:
            raise ValueError(f"options may not set {', '.join(sorted(taken))}: "
                             "cronsvc sets the task id and headers, queue has its own key")
        return self


class CeleryFields(Fields):
    celery: CeleryTarget | None = None


class CeleryKind(Dispatching):
    key = "celery"
    hint = "celery (a Celery task to send)"
    fields = CeleryFields
    per_job = frozenset({"celery"})
    url_fields = ("broker",)

    def run(self, job: Any, ctx: FireContext, stop: Stop) -> Result:
        target: CeleryTarget = job.celery
        app = _app(target)

        def send(delivery: Delivery) -> str:
            app.send_task(target.task, args=list(target.args), kwargs=dict(target.kwargs),
                          task_id=delivery.message_id, headers=delivery.headers(),
                          queue=target.queue, retry=False, **target.options)
            return f"task {target.task} accepted by the broker"

        return dispatch(ctx, stop, send, target.wait)

    def prepare(self, job: Any) -> None:
        # The app, its result backend's module (send_task loads it) and one connection
        # in its pool, which the first send takes.
        app = _app(job.celery)
        app.backend  # noqa: B018 - a property that loads the backend
        with app.producer_or_acquire() as producer:
            producer.connection.ensure_connection(max_retries=1)

    def imports(self, job: Any) -> Mapping[str, Target]:
        return {"celery.app": Target(job.celery.app, "send_task")} if job.celery.app else {}


_APPS: dict[tuple[str | None, str | None], Any] = {}
_LOCK = threading.Lock()


def _app(target: CeleryTarget) -> Any:
    """The Celery app a target sends with, made once per worker: the user's, or one on
    the broker URL (its ``${VAR}`` filled in now, never kept in the definition)."""
    key = (target.app, target.broker)
    with _LOCK:
        app = _APPS.get(key)
        if app is None:
            app = _APPS[key] = _make(target)
        return app


def _make(target: CeleryTarget) -> Any:
    try:
        import celery
    except ImportError as exc:
        raise RuntimeError(f"celery jobs need Celery on the worker: {EXTRA}") from exc
    if target.app is not None:
        app = locate(target.app)
    else:
        app = celery.Celery("cronsvc", broker=expand(target.broker or "", "celery.broker"))
    # AMQP: the broker confirms each message before send_task returns.
    options = dict(app.conf.broker_transport_options or {})
    options.setdefault("confirm_publish", True)
    app.conf.broker_transport_options = options
    return app


KIND = CeleryKind()
