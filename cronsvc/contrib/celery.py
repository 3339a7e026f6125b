"""Celery tasks that cronsvc sends run once per fire, and report back.

```python
from celery import Celery
from cronsvc.contrib.celery import Guarded

app = Celery("proj", broker="redis://...")

@app.task(base=Guarded)
def digest(team):
    ...
```

A message cronsvc sent carries its delivery in its headers: :class:`Guarded` runs the
task through :class:`cronsvc.contrib.guard.Guard` (once, reporting ok or failed with the
duration and the error); a task called any other way runs as usual. Set
``CRONSVC_REDIS_URL`` in the Celery worker's environment (or ``Guarded.cronsvc_url``).
"""

from __future__ import annotations

from typing import Any

from celery import Task

from cronsvc.contrib.guard import process_guard
from cronsvc.run.dispatch import HEADERS, TRACE_HEADERS, Delivery


def delivery_of(request: Any) -> Delivery | None:
    """The delivery a task's request carries, or None. Celery keeps a message's custom
    headers as attributes of the request (and, by version, in ``request.headers``)."""
    headers = dict(getattr(request, "headers", None) or {})
    for name in (*HEADERS.values(), *TRACE_HEADERS):
        value = getattr(request, name, None)
        if value is not None:
            headers.setdefault(name, value)
    return Delivery.read(headers)


class Guarded(Task):  # type: ignore[misc]
    """A Celery task base: a fire's second delivery is skipped, and each outcome is
    reported to cronsvc."""

    abstract = True
    #: cronsvc's Redis; None: the ``CRONSVC_REDIS_URL`` variable.
    cronsvc_url: str | None = None

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        delivery = delivery_of(self.request)
        return process_guard(self.cronsvc_url).run(delivery, lambda: super(Guarded, self).__call__(
            *args, **kwargs))
