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

from cronsvc.errors import ScheduleError
from cronsvc.keys import DEFAULT_POOL, Keys
from cronsvc.malformed import named
from cronsvc.schedule.runtime import MAX_AHEAD, parse_stored, plan_schedule
from cronsvc.store.scripts import Scripts

log = logging.getLogger("cronsvc.planner")

#: Schedules read and planned per round trip.
PAGE = 1000
#: Schedules planned per tick at most (the rest at the next tick, oldest mark first).
PER_TICK = 200_000
#: Schedules of jobs the file lacks that a planner says it leaves, at most (once each).
SAID = 10_000


def plan_schedules(scripts: Scripts, keys: Keys, now: int, upto: int,
                   lookback_ms: int, tick_s: float,
                   pool_of: Callable[[str], str] = lambda _: DEFAULT_POOL,
                   known: Callable[[str], bool] = lambda _: True,
                   said: set[str] | None = None) -> tuple[int, int]:
    """Queue the fires of the shard's schedules up to ``upto``, each in the queue of its
    job's pool (``pool_of``); (fires added, schedules looked at). A schedule changed
    meanwhile is skipped: its changer planned it. One of a job this planner's file does not
    have (``known``) is left for a planner whose file has it, and said once (``said``
    holds the ids said); one whose line does not read is set aside."""
    ahead = max(MAX_AHEAD, math.ceil(3 * tick_s))  # an every-second schedule outlasts a tick
    said = set() if said is None else said
    added = seen = left = 0
    while seen < PER_TICK:
        due, aside = scripts.schedule_due(keys, upto, left, PAGE)
        if aside:
            log.warning("set aside %d runtime schedule entries that do not read "
                        "(`cronsvc malformed` lists them)", aside)
        if not due:
            break
        entries: dict[str, list[tuple[str, int, float, int, list[int]]]] = {}
        for sid, mark, line in due:
            try:
                schedule = parse_stored(sid, line)
                if not known(schedule.job):
                    left += 1
                    if sid not in said and len(said) < SAID:
                        said.add(sid)
                        log.info("%s: not planned here: this planner's file has no job %s",
                                 sid, schedule.job)
                    continue
                dues, new_mark = plan_schedule(schedule, max(mark, now - lookback_ms), upto,
                                               ahead)
            except (ValueError, TypeError, ScheduleError) as exc:
                if not scripts.schedule_aside(keys, sid, line.split("|", 1)[0], str(exc)):
                    left += 1  # changed meanwhile: read again at the next tick
                else:
                    log.warning("set aside %s (`cronsvc malformed` lists it)",
                                named(keys.schedules, sid, str(exc)))
                continue
            entries.setdefault(pool_of(schedule.job), []).append(
                (sid, schedule.rev, mark, new_mark, dues))
        seen += len(due)
        for pool, pooled in entries.items():
            added += scripts.schedule_plan(keys.with_pool(pool), pooled).added
        if len(due) < PAGE:
            break
    return added, seen
