"""``rq``: enqueue an RQ job with RQ's own client, its job id the fire id.

```yaml
rq: {func: proj.jobs.digest, queue: default, redis: "redis://rq-redis:6379/0",
     args: [1], kwargs: {a: 2}, options: {job_timeout: 600}}
```

``func`` is sent as a dotted name, so nothing of the user's code needs importing here.
``redis`` is RQ's Redis (``${VAR}`` filled from the worker's environment when sending);
without it, ``${RQ_REDIS_URL}``, the variable RQ's own command line reads. The job's
data is JSON (RQ's ``JSONSerializer``): cronsvc writes no pickle, so the RQ worker runs
with ``--serializer rq.serializers.JSONSerializer``.

RQ job ids allow ``[A-Za-z0-9_-]`` only: the id is :func:`cronsvc.run.dispatch.safe_id`
of the fire id, and the delivery travels in the job's ``meta["cronsvc"]``
(:meth:`cronsvc.run.dispatch.Delivery.as_dict`). The job is enqueued with RQ's
``unique=True``: RQ refuses, atomically, a job id it holds, so the same delivery sent
twice (a dispatcher killed after its send) is one RQ job. An earlier delivery of the
fire (a failed attempt, retried) is replaced once it no longer runs. The worker's job
class :class:`cronsvc.contrib.rq.GuardedJob` runs each delivery once and reports its
outcome.
"""

from __future__ import annotations

import functools
import inspect
from typing import Any

from pydantic import BaseModel, ConfigDict, field_validator, model_validator

from cronsvc.clock import SYSTEM
from cronsvc.kinds.dispatching import Dispatching
from cronsvc.kinds.kind import Fields
from cronsvc.run.context import FireContext
from cronsvc.run.dispatch import FIELD, Delivery, dispatch, safe_id
from cronsvc.run.outcome import Result, Stop
from cronsvc.secrets import expand

#: What `pip install` gives a worker that lacks the library.
EXTRA = "pip install 'cronsvc[rq]'"
#: RQ's Redis when a target names none: the variable ``rq worker`` reads too.
DEFAULT_REDIS = "${RQ_REDIS_URL}"
#: The options of RQ's ``enqueue`` a job file may set: plain values only (the others
#: take Python objects: callbacks, ``Retry``, dependencies).
OPTIONS = frozenset({"job_timeout", "result_ttl", "ttl", "failure_ttl", "description",
                     "at_front"})
#: The ones cronsvc sets itself.
TAKEN = frozenset({"job_id", "meta", "unique", "args", "kwargs", "serializer"})
#: RQ's states of a job that may still run: an earlier delivery in one is not replaced.
RUNNING = frozenset({"started"})


class RqTarget(BaseModel):
    """The function a fire enqueues, and where."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    func: str
    queue: str = "default"
    redis: str = DEFAULT_REDIS
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = {}
    options: dict[str, Any] = {}
    #: Wait for the outcome the job's guard reports (False: ok once RQ took it).
    wait: bool = True

    @field_validator("func")
    @classmethod
    def _func(cls, value: str) -> str:
        if "." not in value or ":" in value:
            raise ValueError("expected 'package.module.function', the dotted name RQ's "
                             "worker imports")
        return value

    @model_validator(mode="after")
    def _options(self) -> RqTarget:
        taken = sorted(TAKEN & set(self.options))
        if taken:
            raise ValueError(f"options may not set {', '.join(taken)}: cronsvc sets the job "
                             "id, meta and serializer; args and kwargs have their own keys")
        other = sorted(set(self.options) - OPTIONS)
        if other:
            raise ValueError(f"options: unknown {', '.join(other)}; expected some of "
                             f"{', '.join(sorted(OPTIONS))}")
        return self


class RqFields(Fields):
    rq: RqTarget | None = None


class RqKind(Dispatching):
    key = "rq"
    hint = "rq (an RQ job to enqueue)"
    fields = RqFields
    per_job = frozenset({"rq"})
    url_fields = ("redis",)

    def run(self, job: Any, ctx: FireContext, stop: Stop) -> Result:
        target: RqTarget = job.rq
        queue = _queue(target.redis, target.queue)

        def send(delivery: Delivery) -> str:
            said = enqueue(queue, target, delivery)
            # The lag shows in the history: a broker that was down delays, never loses.
            return f"{said}, {SYSTEM.now_ms() - delivery.scheduled_ms} ms after its time"

        return dispatch(ctx, stop, send, target.wait)

    def prepare(self, job: Any) -> None:
        # The queue, and one connection in its client's pool: the first send takes it.
        _queue(job.rq.redis, job.rq.queue).connection.ping()


def enqueue(queue: Any, target: RqTarget, delivery: Delivery) -> str:
    """Enqueue ``delivery`` on ``queue`` (an ``rq.Queue``), once: a line saying what RQ
    did with it. Raises while RQ's Redis refuses, and while an earlier delivery of the
    fire still runs (the send is tried again until it ends or the fire times out)."""
    from rq.exceptions import DuplicateJobError, NoSuchJobError

    job_id = safe_id(delivery.message_id)
    try:
        _enqueue(queue, target, delivery, job_id)
        return f"job {job_id} enqueued on {queue.name}"
    except DuplicateJobError:
        pass
    try:
        held = queue.job_class.fetch(job_id, connection=queue.connection,
                                     serializer=queue.serializer)
    except NoSuchJobError:  # gone since (RQ's result_ttl): the next try enqueues it
        raise RuntimeError(f"job {job_id}: held by RQ a moment ago, gone now") from None
    if (held.meta.get(FIELD) or {}).get("attempt") == delivery.attempt:
        return f"job {job_id} already held by RQ (it refused a second)"
    status = held.get_status()
    status = str(getattr(status, "value", status))
    if status in RUNNING:
        raise RuntimeError(f"job {job_id}: an earlier delivery is still {status} in RQ")
    held.delete()
    _enqueue(queue, target, delivery, job_id)
    return f"job {job_id} enqueued on {queue.name}, in place of an earlier delivery ({status})"


def _enqueue(queue: Any, target: RqTarget, delivery: Delivery, job_id: str) -> None:
    options = dict(target.options)
    if "job_timeout" in options:
        options["timeout"] = options.pop("job_timeout")
    queue.enqueue_call(target.func, args=list(target.args), kwargs=dict(target.kwargs),
                       job_id=job_id, meta={FIELD: delivery.as_dict()}, unique=True, **options)


@functools.cache
def _queue(redis_url: str, name: str) -> Any:
    """The RQ queue a target enqueues on, made once per worker, on RQ's Redis (its
    ``${VAR}`` filled in now, never kept in the definition)."""
    try:
        from rq import Queue
        from rq.serializers import JSONSerializer
    except ImportError as exc:
        raise RuntimeError(f"rq jobs need RQ on the worker: {EXTRA}") from exc
    if "unique" not in inspect.signature(Queue.enqueue_call).parameters:
        raise RuntimeError(f"rq jobs need an RQ that refuses a job id it holds (enqueue's "
                           f"unique, RQ 3.0): {EXTRA} --upgrade")
    import redis  # RQ's client takes a redis-py connection: RQ's broker, not cronsvc's

    url = expand(redis_url, "rq.redis")
    connection = redis.Redis.from_url(url, socket_connect_timeout=5, socket_timeout=30)
    return Queue(name, connection=connection, serializer=JSONSerializer)


KIND = RqKind()
