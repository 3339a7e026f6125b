"""``arq``: enqueue an arq job with arq's own client, its job id the fire id.

```yaml
arq: {function: digest, redis: "redis://${ARQ_HOST}:6379/0", queue: "arq:queue",
      args: [1], kwargs: {a: 2}, options: {expires: 1h}}
```

arq's messages have no headers: the fire's delivery travels as one more keyword
argument, ``cronsvc`` (:data:`cronsvc.run.dispatch.FIELD`, the delivery's
:meth:`~cronsvc.run.dispatch.Delivery.as_dict`), which the consumer's wrapper
:func:`cronsvc.contrib.arq.guarded` takes off before the user's function sees the
call. The job is JSON (:func:`to_json`), not arq's default pickle: cronsvc writes no
pickle, so the arq worker takes :mod:`cronsvc.contrib.arq`'s serializers.

arq refuses a job whose id it holds, queued, running or as a kept result
(``enqueue_job`` returns None): a dispatcher that died after its send, whose
successor sends the same delivery again, is told so, and the fire goes on as sent.
A retry is a new delivery, and arq would refuse its id while the failed run's result
is kept (an hour, by default): a delivery after the first has the id
``<fire id>~<attempt>`` (:func:`job_id`).

arq is asyncio and a cronsvc worker runs a fire in a thread: the sends run on one
event loop of this module's, in a thread of its own, with one pool per Redis URL,
reused by every fire (:class:`Sender`).
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, field_validator

from cronsvc.clock import SYSTEM
from cronsvc.durations import parse_duration
from cronsvc.kinds.dispatching import Dispatching
from cronsvc.kinds.kind import Fields
from cronsvc.run.context import FireContext
from cronsvc.run.dispatch import FIELD, Delivery, dispatch
from cronsvc.run.outcome import Result, Stop
from cronsvc.secrets import VAR, expand

#: What `pip install` gives a worker that lacks the library.
EXTRA = "pip install 'cronsvc[arq]'"
#: The queue arq's workers read when none is named (``arq.constants.default_queue_name``).
DEFAULT_QUEUE = "arq:queue"
#: How long one send may wait for arq's Redis before it counts as refused (and is tried
#: again, as any refused send is).
SEND_TIMEOUT = 10.0
_SCHEMES = ("redis://", "rediss://", "unix://")

T = TypeVar("T")


def to_json(obj: Any) -> bytes:
    """An arq job (or its result) as JSON; what JSON cannot say (an exception arq keeps
    as a failed job's result) as its ``repr``."""
    return json.dumps(obj, separators=(",", ":"), default=repr).encode()


def from_json(data: bytes) -> Any:
    return json.loads(data)


class ArqOptions(BaseModel):
    """``enqueue_job``'s own options a target may set."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    #: Run the job this long after it is enqueued (``_defer_by``).
    defer_by: float | None = None
    #: Do not start the job once it waited this long (``_expires``; arq's default: a day).
    expires: float | None = None

    @field_validator("defer_by", "expires", mode="before")
    @classmethod
    def _duration(cls, value: object) -> float | None:
        return None if value is None else parse_duration(value)


class ArqTarget(BaseModel):
    """The arq function a fire enqueues, and where."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    function: str
    #: arq's Redis (``${VAR}`` filled in from the worker's environment when sending).
    redis: str
    queue: str | None = None
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = {}
    options: ArqOptions = ArqOptions()
    #: Wait for the outcome the function's guard reports (False: ok once arq took it).
    wait: bool = True

    @field_validator("redis")
    @classmethod
    def _redis(cls, value: str) -> str:
        if not value.startswith(_SCHEMES) and not VAR.match(value):
            raise ValueError(f"expected a Redis URL ({', '.join(_SCHEMES)}), or ${{VAR}}")
        return value

    @field_validator("kwargs")
    @classmethod
    def _kwargs(cls, value: dict[str, Any]) -> dict[str, Any]:
        taken = sorted(k for k in value if k == FIELD or k.startswith("_"))
        if taken:
            raise ValueError(f"may not set {', '.join(taken)}: '{FIELD}' carries the fire, "
                             "and arq keeps names starting with '_' for itself")
        return value


class ArqFields(Fields):
    arq: ArqTarget | None = None


class ArqKind(Dispatching):
    key = "arq"
    hint = "arq (an arq function to enqueue)"
    fields = ArqFields
    per_job = frozenset({"arq"})
    url_fields = ("redis",)

    def run(self, job: Any, ctx: FireContext, stop: Stop) -> Result:
        target: ArqTarget = job.arq
        sender = SENDER.ready()

        def send(delivery: Delivery) -> str:
            url = expand(target.redis, "arq.redis")
            name = job_id(delivery)
            queue = target.queue or DEFAULT_QUEUE
            if sender.enqueue(target, url, name, delivery):
                late = SYSTEM.now_ms() - delivery.scheduled_ms
                return f"arq job {name} queued on {queue}, {late} ms after its time"
            return (f"arq job {name} already taken by the queue (arq holds it, or its "
                    "result, and refused a second)")

        return dispatch(ctx, stop, send, target.wait)

    def prepare(self, job: Any) -> None:
        SENDER.ready().connect(expand(job.arq.redis, "arq.redis"))


def job_id(delivery: Delivery) -> str:
    """The arq job id of ``delivery``: the fire id; a retry's, ``<fire id>~<attempt>``
    (``~`` is in no fire id), since arq keeps the id of the failed run's result."""
    if delivery.attempt <= 1:
        return delivery.message_id
    return f"{delivery.message_id}~{delivery.attempt}"


class Sender:
    """The worker's one event loop for arq (in a daemon thread, started with the first
    arq fire) and its pools, one per Redis URL, made on first use."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._pools: dict[str, asyncio.Future[Any]] = {}

    def ready(self) -> Sender:
        """This sender, its loop running; a clear error where arq is not installed."""
        try:
            import arq  # noqa: F401
        except ImportError as exc:
            raise RuntimeError(f"arq jobs need arq on the worker: {EXTRA}") from exc
        with self._lock:
            if self._loop is None:
                self._loop = asyncio.new_event_loop()
                threading.Thread(target=self._loop.run_forever, name="cronsvc-arq",
                                 daemon=True).start()
        return self

    def enqueue(self, target: ArqTarget, url: str, name: str, delivery: Delivery) -> bool:
        """Enqueue ``delivery`` as arq job ``name``: True, or False if arq already held
        that id. Raises when arq's Redis refused or did not answer in time."""
        return self._run(self._enqueue(target, url, name, delivery))

    def connect(self, url: str) -> None:
        """The pool on ``url``, made now if it is not yet."""
        self._run(self._pool(url))

    def _run(self, coro: Coroutine[Any, Any, T]) -> T:
        assert self._loop is not None, "ready() starts the loop"
        future = asyncio.run_coroutine_threadsafe(coro, self._loop)
        try:
            return future.result(SEND_TIMEOUT)
        except TimeoutError:
            future.cancel()
            raise TimeoutError(f"arq's Redis did not answer within {SEND_TIMEOUT:g}s") from None

    async def _enqueue(self, target: ArqTarget, url: str, name: str,
                       delivery: Delivery) -> bool:
        pool = await self._pool(url)
        kwargs = {**target.kwargs, FIELD: delivery.as_dict()}
        job = await pool.enqueue_job(target.function, *target.args, _job_id=name,
                                     _queue_name=target.queue or DEFAULT_QUEUE,
                                     _defer_by=target.options.defer_by,
                                     _expires=target.options.expires, **kwargs)
        return job is not None

    async def _pool(self, url: str) -> Any:
        """The pool on ``url``: made once, shared by concurrent sends; a failed one is
        dropped, so the next send connects again."""
        made = self._pools.get(url)
        if made is None:
            made = self._pools[url] = asyncio.ensure_future(_connect(url))
        try:
            return await asyncio.shield(made)
        except Exception:
            if self._pools.get(url) is made:
                del self._pools[url]
            raise


async def _connect(url: str) -> Any:
    from arq.connections import RedisSettings, create_pool

    settings = RedisSettings.from_dsn(url)
    settings.conn_retries = 0  # a refused send is tried again by dispatch(), every 0.5 s
    return await create_pool(settings, job_serializer=to_json, job_deserializer=from_json)


SENDER = Sender()
KIND = ArqKind()
