"""dramatiq actors that cronsvc sends run once per fire, and report back.

```python
import dramatiq
from dramatiq.brokers.redis import RedisBroker
from cronsvc.contrib.dramatiq import GuardMiddleware

broker = RedisBroker(url="redis://...")
broker.add_middleware(GuardMiddleware())
dramatiq.set_broker(broker)

@dramatiq.actor
def digest(team):
    ...
```

A message cronsvc sent carries its delivery in its options (under ``cronsvc``): the
middleware runs it through :class:`cronsvc.contrib.guard.Guard`, whose start and end
dramatiq's hooks call on either side of the actor: ``before_process_message`` marks it
started (a second delivery is skipped: ``SkipMessage``, and dramatiq acks it),
``after_process_message`` reports ok or failed with the duration and the error. Any
other message runs as usual. Set ``CRONSVC_REDIS_URL`` in the dramatiq worker's
environment (or pass ``url``).
"""

from __future__ import annotations

import threading
from typing import Any

from dramatiq.middleware import Middleware, MiddlewareError, SkipMessage

from cronsvc.contrib.guard import Guard, Running
from cronsvc.run.dispatch import FIELD, Delivery


class GuardUnreachable(MiddlewareError):
    """The guard could not ask cronsvc's Redis whether a delivery may run: the actor does
    not run unguarded; the message fails as dramatiq fails it (retried, or dead)."""


class SkippedBeforeRun(Exception):
    """What a delivery that started but never ran reports: another middleware skipped
    its message after the guard let it run."""


class GuardMiddleware(Middleware):
    """A dramatiq middleware: a fire's second delivery is skipped, and each outcome is
    reported to cronsvc. Add it last (``broker.add_middleware``), so that no middleware
    after it can skip a message the guard let run."""

    def __init__(self, url: str | None = None, *, guard: Guard | None = None) -> None:
        self.guard = guard or Guard(url)
        # Each worker thread runs one message at a time, its hooks on that thread.
        self._local = threading.local()

    def before_process_message(self, broker: Any, message: Any) -> None:
        self._local.running = None
        delivery = Delivery.read(message.options.get(FIELD))
        if delivery is None or message.failed:  # not cronsvc's, or another middleware failed it
            return
        try:
            running = self.guard.begin(delivery)
        except Exception as exc:
            raise GuardUnreachable(f"{delivery.fire_id}: {type(exc).__name__}: {exc}") from exc
        if running is None:
            raise SkipMessage(f"{delivery.fire_id}: a second delivery")
        self._local.running = (message, running)

    def after_process_message(self, broker: Any, message: Any, *, result: Any = None,
                              exception: BaseException | None = None) -> None:
        running = self._take(message)
        if running is not None:
            self.guard.finish(running, exception, result)

    def after_skip_message(self, broker: Any, message: Any) -> None:
        running = self._take(message)
        if running is not None:
            self.guard.finish(running, SkippedBeforeRun("skipped by a dramatiq middleware "
                                                        "before it ran"))

    def _take(self, message: Any) -> Running | None:
        """The run :meth:`before_process_message` began for ``message``, once."""
        held = getattr(self._local, "running", None)
        if held is None or held[0] is not message:
            return None
        self._local.running = None
        return held[1]
