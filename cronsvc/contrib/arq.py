"""arq functions that cronsvc enqueues run once per fire, and report back.

```python
from arq.connections import RedisSettings
from cronsvc.contrib.arq import guarded, job_deserializer, job_serializer

@guarded
async def digest(ctx, team, size=0):
    ...

class WorkerSettings:
    functions = [digest]
    redis_settings = RedisSettings.from_dsn("redis://...")
    job_serializer = job_serializer      # cronsvc sends JSON, never pickle
    job_deserializer = job_deserializer
```

arq's messages have no headers, so cronsvc passes a fire's delivery as one keyword
argument, ``cronsvc`` (:data:`cronsvc.run.dispatch.FIELD`). :func:`guarded` takes it off
and runs the function through :class:`cronsvc.contrib.guard.Guard` (once, reporting ok or
failed with the duration and the error); a job enqueued any other way carries no such
argument and runs as usual. arq's own hooks (``on_job_start``, ``after_job_end``) would
not do: they see neither the job's arguments nor can they skip it. Set
``CRONSVC_REDIS_URL`` in the arq worker's environment (or pass ``url``).
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from cronsvc.contrib.guard import Skipped, process_guard
from cronsvc.kinds.arq import from_json, to_json
from cronsvc.run.dispatch import FIELD, Delivery

T = TypeVar("T")
#: What a guarded function returns for a second delivery of a fire (arq keeps it as the
#: job's result, so it is text: JSON can say it).
SKIPPED_RESULT = "skipped: a second delivery of a fire that already ran or runs"

#: The ``job_serializer`` and ``job_deserializer`` of an arq worker that runs what cronsvc
#: sends: JSON (cronsvc writes no pickle, arq's default).
job_serializer = to_json
job_deserializer = from_json

def guarded(fn: Callable[..., Awaitable[T]] | None = None, *, url: str | None = None) -> Any:
    """An arq function (``async def f(ctx, ...)``) that runs each fire's delivery once and
    reports its outcome to cronsvc (on ``url``, else ``CRONSVC_REDIS_URL``). The wrapper
    keeps the function's name, which is what arq enqueues it by."""
    if fn is None:
        return functools.partial(guarded, url=url)
    run = fn

    @functools.wraps(run)
    async def wrapper(ctx: dict[str, Any], *args: Any, **kwargs: Any) -> T | str:
        delivery = Delivery.read(kwargs.pop(FIELD, None))
        value = await process_guard(url).run_async(delivery, lambda: run(ctx, *args, **kwargs))
        return SKIPPED_RESULT if isinstance(value, Skipped) else value

    return wrapper
