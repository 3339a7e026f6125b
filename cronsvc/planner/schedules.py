"""The planner's share of runtime schedules: queue the next fires of those that need it.

Work scales with what is due, not with what exists: the marks (``Keys.schedule_marks``,
planned-up-to per schedule) are a sorted set, and a tick reads only the schedules whose
mark is below its horizon. A daily schedule's mark reaches to just before its next fire,
so it comes up once a day; an every-second one holds at most
:data:`cronsvc.schedule.runtime.MAX_AHEAD` fires and comes up at every tick.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from typing import Any

import redis

from cronsvc.keys import DEFAULT_POOL, Keys
from cronsvc.schedule.runtime import MAX_AHEAD, parse_stored, plan_schedule
from cronsvc.store.replies import text
from cronsvc.store.scripts import Scripts

log = logging.getLogger("cronsvc.planner")

#: Schedules read and planned per round trip.
PAGE = 1000
#: Schedules planned per tick at most (the rest at the next tick, oldest mark first).
PER_TICK = 200_000


def plan_schedules(client: redis.Redis, scripts: Scripts, keys: Keys, now: int, upto: int,
                   lookback_ms: int, tick_s: float,
                   pool_of: Callable[[str], str] = lambda _: DEFAULT_POOL) -> tuple[int, int]:
    """Queue the fires of the shard's schedules up to ``upto``, each in the queue of its
    job's pool (``pool_of``); (fires added, schedules looked at). A schedule changed
    meanwhile is skipped: its changer planned it."""
    ahead = max(MAX_AHEAD, math.ceil(3 * tick_s))  # an every-second schedule outlasts a tick
    added = seen = 0
    while seen < PER_TICK:
        due: list[tuple[Any, float]] = client.zrangebyscore(  # type: ignore[assignment]
            keys.schedule_marks, "-inf", f"({upto}", start=0, num=PAGE, withscores=True)
        if not due:
            break
        ids = [text(sid) for sid, _ in due]
        lines = client.hmget(keys.schedules, ids)
        entries: dict[str, list[tuple[str, int, float, int, list[int]]]] = {}
        for sid, (_, mark), raw in zip(ids, due, lines, strict=True):
            if raw is None:
                continue  # deleted between the two reads
            try:
                schedule = parse_stored(sid, text(raw))
            except ValueError as exc:
                log.warning("%s: not planned: %s", sid, exc)
                continue
            after = max(int(mark), now - lookback_ms)
            dues, new_mark = plan_schedule(schedule, after, upto, ahead)
            entries.setdefault(pool_of(schedule.job), []).append(
                (sid, schedule.rev, mark, new_mark, dues))
        seen += len(due)
        for pool, pooled in entries.items():
            added += scripts.schedule_plan(keys.with_pool(pool), pooled).added
        if len(due) < PAGE:
            break
    return added, seen
