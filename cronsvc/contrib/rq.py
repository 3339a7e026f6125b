"""RQ jobs that cronsvc enqueues run once per fire, and report back.

```sh
rq worker --job-class cronsvc.contrib.rq.GuardedJob \\
          --serializer rq.serializers.JSONSerializer --url "$RQ_REDIS_URL" default
```

The job class is the extension point, rather than a worker class or RQ's callbacks: it
is RQ's one hook that runs around the function, in the process that runs it, for every
job and for every kind of worker (forking, simple, pooled), so the user's functions stay
as they are. Callbacks come after the run (too late to skip a second delivery) and are
set by the enqueuer; a worker class would be one more thing to subclass for a custom
worker.

A job cronsvc enqueued carries its delivery in ``job.meta["cronsvc"]``: :class:`GuardedJob`
runs it through :class:`cronsvc.contrib.guard.Guard` (once, reporting ok or failed with
the duration and the error, ``cronsvc.current()`` giving its fire), and a job enqueued
any other way runs as usual. Set ``CRONSVC_REDIS_URL`` in the RQ worker's environment.
"""

from __future__ import annotations

from typing import Any

from rq.job import Job

from cronsvc.contrib.guard import Skipped, process_guard
from cronsvc.run.dispatch import FIELD, Delivery


class GuardedJob(Job):
    """An RQ job class: a fire's second delivery is skipped (its result says so), and
    each outcome is reported to cronsvc. An exception is reported, then raised again for
    RQ's own handling (the failed job registry, RQ's retries)."""

    #: cronsvc's Redis; None: the ``CRONSVC_REDIS_URL`` variable.
    cronsvc_url: str | None = None

    def perform(self) -> Any:
        delivery = Delivery.read(self.meta.get(FIELD))
        value = process_guard(self.cronsvc_url).run(delivery, super().perform)
        if isinstance(value, Skipped):
            # The result is stored with the job's serializer: text, not the marker.
            self._result = f"skipped: a second delivery of {delivery and delivery.fire_id}"
        return self._result
