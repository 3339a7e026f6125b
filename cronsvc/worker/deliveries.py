"""Where the outcome of a dispatched fire comes back to the worker holding it: the fire's
deliveries in Redis (:meth:`cronsvc.keys.Keys.deliveries`), written by the consumer's
guard (:mod:`cronsvc.contrib`) and read here, blocking, while the run holds its slot and
its lease. The kinds ask through :class:`cronsvc.run.dispatch.Outcomes`."""

from __future__ import annotations

import logging
from typing import Any

import redis

from cronsvc.keys import Keys
from cronsvc.run.context import FireContext
from cronsvc.run.dispatch import KEEP_MS, Begun, Delivery, begun, entry_result
from cronsvc.run.outcome import Result, Stop
from cronsvc.store.faults import REDIS_ERRORS, describe, is_outage
from cronsvc.store.scripts import Scripts

log = logging.getLogger(__name__)

BLOCK_MS = 500  # one read waits this long, then looks at the run's stop


class Deliveries:
    """The outcomes of the dispatched fires of one shard (:class:`Outcomes`)."""

    def __init__(self, client: redis.Redis, scripts: Scripts, keys: Keys) -> None:
        self.client = client
        self.scripts = scripts
        self.keys = keys

    def begin(self, ctx: FireContext) -> Begun:
        key = self.keys.deliveries(ctx.fire_id)
        return begun(self.scripts.dispatch(key, "begin", ctx.attempt, KEEP_MS), ctx, key)

    def sent(self, delivery: Delivery) -> None:
        self.scripts.dispatch(delivery.key, "sent", delivery.attempt, KEEP_MS)

    def passing(self, exc: Exception) -> bool:
        if not is_outage(exc):
            return False
        log.warning("cannot note a dispatched fire's delivery, trying again: %s",
                    describe(exc))
        return True

    def lost(self, delivery: Delivery, why: str) -> None:
        try:
            self.scripts.dispatch(delivery.key, "lost", delivery.attempt, KEEP_MS, why)
        except REDIS_ERRORS as exc:  # the next holder finds it 'sent' and waits again
            log.warning("%s: cannot mark its delivery given up on: %s", delivery.fire_id,
                        describe(exc))

    def wait(self, delivery: Delivery, stop: Stop) -> Result | None:
        after = "0-0"
        while stop.pause(0) == "done":
            try:
                found: Any = self.client.xread({delivery.key: after}, block=BLOCK_MS)
            except REDIS_ERRORS as exc:
                log.warning("%s: cannot read its outcome, trying again: %s",
                            delivery.fire_id, describe(exc))
                stop.pause(BLOCK_MS / 1000)
                continue
            for _stream, entries in found or []:
                for entry_id, fields in entries:
                    after = entry_id
                    result = entry_result(_texts(fields), delivery.attempt)
                    if result is not None:
                        return result
        return None


def _texts(fields: dict[Any, Any]) -> dict[str, str]:
    return {(k.decode() if isinstance(k, bytes) else k):
            (v.decode(errors="replace") if isinstance(v, bytes) else v)
            for k, v in fields.items()}
