"""How `bench/dispatch.py` drives each queue library: the job a fire sends, the library's
own enqueue loop (the reference, with its own client, on the same broker, messages of the
same size), the consumer worker that runs both, and where messages wait on the broker.

A plain message is as large as cronsvc's: the same arguments, and the fire's delivery
under a name of the same length that no guard reads (:func:`disguised`), so the consumer
runs it unguarded. Each library is imported when its target is used: arq lives in a venv
of its own (``.venv-arq``, :data:`ARQ_PYTHON`), where its part of the benchmark runs.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import redis

from cronsvc.run.dispatch import FIELD, HEADERS, Delivery, safe_id
from cronsvc.testing.children import child_env
from cronsvc.testing.queues import QueueWorker, celery_worker

ROOT = Path(__file__).resolve().parents[1]
ARQ_PYTHON = ROOT / ".venv-arq" / "bin" / "python"
ARGS = ("core",)
KWARGS = {"size": 3}
DISGUISE = "x" * len(FIELD)  # the delivery's field, under a name no guard reads
BATCH = 100  # messages per call of a batch API (RQ's enqueue_many)


@dataclass(frozen=True)
class Target:
    """How the benchmark drives one queue library."""

    kind: str  # the job's key, and the library's name
    #: the task names: bench's "noop" and "stamp" as this library calls them
    tasks: dict[str, str]
    #: (broker URL, queue or None for the default, wait, task) -> the job's target
    job: Callable[[str, str | None, bool, str], dict[str, Any]]
    #: The library's own enqueue loop: one message per delivery, the delivery disguised.
    plain: Callable[[str, str | None, str, Sequence[Delivery]], None]
    #: (tmp, broker URL, cronsvc's Redis URL, ledger) -> a running consumer worker
    consumer: Callable[[Path, str, str, Path], AbstractContextManager[Any]]
    default_queue: str  # where messages sent to no named queue wait
    #: messages waiting in a queue (until their task is done, where the library keeps
    #: them so), and the bytes of the first one
    backlog: Callable[[redis.Redis, str], int]
    size: Callable[[redis.Redis, str], int]
    #: the library's batch API, as a second reference (None: it has none)
    batch: Callable[[str, str | None, str, Sequence[Delivery]], None] | None = None
    #: the interpreter its part of the benchmark runs in (None: this one)
    python: Path | None = None
    notes: list[str] = field(default_factory=list)


def disguised(delivery: Delivery) -> dict[str, str]:
    """The delivery's headers under names of the same length that no guard reads."""
    names = set(HEADERS.values())
    return {("x" * 7 + k[7:] if k in names else k): v for k, v in delivery.headers().items()}


def env(broker_var: str, broker: str, redis_url: str, ledger: Path) -> dict[str, str]:
    return child_env((ROOT,), CRONSVC_REDIS_URL=redis_url, CRONSVC_TEST_LEDGER=str(ledger),
                     **{broker_var: broker})


def job_of(what: str, where: str) -> Callable[[str, str | None, bool, str], dict[str, Any]]:
    """The job target maker of a library whose target names its task ``what`` and its
    broker ``where``."""

    def job(broker: str, queue: str | None, wait: bool, task: str) -> dict[str, Any]:
        return {what: task, where: broker, "args": list(ARGS), "kwargs": KWARGS,
                "wait": wait, **({"queue": queue} if queue else {})}

    return job


# -- Celery --------------------------------------------------------------------------
_CELERY: dict[str, Any] = {}


def celery_plain(broker: str, queue: str | None, task: str,
                 deliveries: Sequence[Delivery]) -> None:
    from celery import Celery

    app = _CELERY.get(broker) or _CELERY.setdefault(broker, Celery("plain", broker=broker))
    for d in deliveries:
        app.send_task(task, args=list(ARGS), kwargs=dict(KWARGS), task_id=d.message_id,
                      headers=disguised(d), queue=queue, retry=False)


def celery_consumer(tmp: Path, broker: str, redis_url: str, ledger: Path
                    ) -> AbstractContextManager[Any]:
    return celery_worker(tmp, "bench.celery_tasks", broker, redis_url, name="bench-celery",
                         path=(ROOT,), CRONSVC_TEST_LEDGER=str(ledger))


# -- RQ ------------------------------------------------------------------------------
_RQ: dict[tuple[str, str], Any] = {}


def rq_queue(broker: str, name: str | None) -> Any:
    from rq import Queue
    from rq.serializers import JSONSerializer

    key = (broker, name or "default")
    if key not in _RQ:
        _RQ[key] = Queue(key[1], connection=redis.Redis.from_url(broker),
                         serializer=JSONSerializer)
    return _RQ[key]


def rq_plain(broker: str, queue: str | None, task: str,
             deliveries: Sequence[Delivery]) -> None:
    """``Queue.enqueue_call``, as ``Queue.enqueue`` does it (without cronsvc's
    ``unique=True``, RQ's one-script check of the id)."""
    q = rq_queue(broker, queue)
    for d in deliveries:
        q.enqueue_call(task, args=list(ARGS), kwargs=dict(KWARGS), job_id=safe_id(d.message_id),
                       meta={DISGUISE: d.as_dict()})


def rq_batch(broker: str, queue: str | None, task: str,
             deliveries: Sequence[Delivery]) -> None:
    """``Queue.enqueue_many``: :data:`BATCH` jobs per call, in one pipeline."""
    q = rq_queue(broker, queue)
    for i in range(0, len(deliveries), BATCH):
        q.enqueue_many([q.prepare_data(task, args=list(ARGS), kwargs=dict(KWARGS),
                                       job_id=safe_id(d.message_id),
                                       meta={DISGUISE: d.as_dict()})
                        for d in deliveries[i:i + BATCH]])


def rq_consumer(tmp: Path, broker: str, redis_url: str, ledger: Path
                ) -> AbstractContextManager[Any]:
    argv = [sys.executable, "-m", "rq.cli", "worker", "--job-class",
            "cronsvc.contrib.rq.GuardedJob", "--serializer", "rq.serializers.JSONSerializer",
            "--url", broker, "--name", "bench-rq", "default"]
    return QueueWorker(tmp, "bench-rq", argv, env("RQ_REDIS_URL", broker, redis_url, ledger))


def rq_size(br: redis.Redis, queue: str) -> int:
    first = br.lindex(f"rq:queue:{queue}", 0)
    fields: Any = br.hgetall(b"rq:job:" + first) if first else {}
    return sum(len(k) + len(v) for k, v in fields.items())


# -- dramatiq ------------------------------------------------------------------------
_DRAMATIQ: dict[str, Any] = {}


def dramatiq_plain(broker: str, queue: str | None, task: str,
                   deliveries: Sequence[Delivery]) -> None:
    """``broker.enqueue`` of the message ``actor.send`` makes (the actors are not
    imported here: cronsvc sends by name too)."""
    from dramatiq import Message
    from dramatiq.brokers.redis import RedisBroker

    b = _DRAMATIQ.get(broker) or _DRAMATIQ.setdefault(
        broker, RedisBroker(url=broker, middleware=[]))
    for d in deliveries:
        b.enqueue(Message(queue_name=queue or "default", actor_name=task, args=ARGS,
                          kwargs=dict(KWARGS),
                          options={"max_retries": 0, DISGUISE: d.as_dict()},
                          message_id=d.message_id))


def dramatiq_consumer(tmp: Path, broker: str, redis_url: str, ledger: Path
                      ) -> AbstractContextManager[Any]:
    argv = [sys.executable, "-m", "dramatiq", "bench.dramatiq_actors", "--processes", "1",
            "--threads", "1"]
    return QueueWorker(tmp, "bench-dramatiq", argv, {
        **env("DRAMATIQ_BROKER_URL", broker, redis_url, ledger),
        "dramatiq_worker_timeout": "10"})


def dramatiq_size(br: redis.Redis, queue: str) -> int:
    first = br.lindex(f"dramatiq:{queue}", 0)
    return len(br.hget(f"dramatiq:{queue}.msgs", first) or b"") if first else 0


# -- arq -----------------------------------------------------------------------------
_ARQ: dict[str, Any] = {}


def _arq_loop() -> asyncio.AbstractEventLoop:
    if "loop" not in _ARQ:
        _ARQ["loop"] = asyncio.new_event_loop()
    return _ARQ["loop"]  # type: ignore[no-any-return]


def arq_plain(broker: str, queue: str | None, task: str,
              deliveries: Sequence[Delivery]) -> None:
    """``ArqRedis.enqueue_job`` in a loop, on one pool kept for the run."""
    from arq.connections import RedisSettings, create_pool

    from cronsvc.kinds.arq import DEFAULT_QUEUE, from_json, to_json

    async def send() -> None:
        pool = _ARQ.get(broker)
        if pool is None:
            pool = _ARQ[broker] = await create_pool(
                RedisSettings.from_dsn(broker), job_serializer=to_json,
                job_deserializer=from_json)
        for d in deliveries:
            await pool.enqueue_job(task, *ARGS, _job_id=d.message_id,
                                   _queue_name=queue or DEFAULT_QUEUE,
                                   **KWARGS, **{DISGUISE: d.as_dict()})

    _arq_loop().run_until_complete(send())


def arq_consumer(tmp: Path, broker: str, redis_url: str, ledger: Path
                 ) -> AbstractContextManager[Any]:
    argv = [str(Path(sys.executable).parent / "arq"), "bench.arq_functions.WorkerSettings"]
    return QueueWorker(tmp, "bench-arq", argv, env("ARQ_REDIS_URL", broker, redis_url, ledger))


def arq_size(br: redis.Redis, queue: str) -> int:
    first = br.zrange(queue, 0, 0)
    return int(br.strlen(b"arq:job:" + first[0])) if first else 0


def _targets() -> Iterator[Target]:
    yield Target("celery", {"noop": "bench.noop", "stamp": "bench.stamp"},
                 job_of("task", "broker"),
                 celery_plain, celery_consumer, "celery",
                 lambda br, q: int(br.llen(q)), lambda br, q: len(br.lindex(q, 0) or b""),
                 notes=["consumer: `celery worker --pool solo`; plain loop: "
                        "`app.send_task`"])
    yield Target("rq", {"noop": "bench.rq_jobs.noop", "stamp": "bench.rq_jobs.stamp"},
                 job_of("func", "redis"), rq_plain, rq_consumer, "default",
                 lambda br, q: int(br.llen(f"rq:queue:{q}")), rq_size, batch=rq_batch,
                 notes=["consumer: `rq worker` (RQ's default worker: a fork per job), "
                        "JSON serializer, job class `GuardedJob`; plain loop: "
                        "`Queue.enqueue_call`; batch: `Queue.enqueue_many`, "
                        f"{BATCH} jobs per call"])
    yield Target("dramatiq", {"noop": "noop", "stamp": "stamp"},
                 job_of("actor", "broker"),
                 dramatiq_plain, dramatiq_consumer, "default",
                 lambda br, q: int(br.hlen(f"dramatiq:{q}.msgs")), dramatiq_size,
                 notes=["consumer: `dramatiq --processes 1 --threads 1` with "
                        "`dramatiq_worker_timeout=10` (its Redis consumer polls an empty "
                        "queue with a backoff up to the worker timeout, 1 s by default); "
                        "plain loop: `broker.enqueue` of the message `actor.send` makes"])
    yield Target("arq", {"noop": "noop", "stamp": "stamp"}, job_of("function", "redis"),
                 arq_plain,
                 arq_consumer, "arq:queue", lambda br, q: int(br.zcard(q)), arq_size,
                 python=ARQ_PYTHON,
                 notes=["consumer: `arq` with `poll_delay` 10 ms (0.5 s by default), "
                        "`max_jobs` 10; plain loop: `ArqRedis.enqueue_job`; run in "
                        "`.venv-arq` (arq pins redis-py 5), cronsvc's workers too"])


TARGETS = {t.kind: t for t in _targets()}
