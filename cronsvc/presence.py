"""Who a planner or worker is, and when it counts as live: one rule for ``status``,
metrics and planners.

Workers write their presence every :data:`PRESENCE_EVERY` seconds; planners
with each tick. A member silent for longer than its allowance is shown as gone
and no longer counts (a worker as holding a definition, a planner as holding
the newest job file).
"""

from __future__ import annotations

import os
import re
import socket
from collections.abc import Iterable, Mapping
from typing import Any

#: A sleeping worker looks at Redis at least this often (seconds) even without a wake-up
#: message (messages can be lost while a connection is re-established). It otherwise
#: sleeps until the next due fire or lease deadline the claim reports, so this only
#: bounds the delay after a lost message; it is also most of what an idle worker costs.
MAX_SLEEP_S = 5.0
#: Whoever queues a fire due this soon tells the workers: they may sleep past it.
WAKE_WITHIN_MS = int(MAX_SLEEP_S * 1000)
#: How often a worker writes its presence (seconds).
PRESENCE_EVERY = 5.0
#: A worker silent this long (four presence periods) is gone.
WORKER_STALE_MS = 20_000
#: A planner's heartbeat is its tick: it is gone after two ticks and this slack.
PLANNER_SLACK_MS = 10_000


def planner_stale_ms(tick_s: float) -> int:
    """How long a planner ticking every ``tick_s`` seconds may be silent and still live."""
    return int(2 * tick_s * 1000) + PLANNER_SLACK_MS


def alive(seen_ms: int, now_ms: int, stale_ms: int) -> bool:
    """Whether a member last seen at ``seen_ms`` still counts at ``now_ms``."""
    return now_ms - seen_ms <= stale_ms


def planner_tick_s(info: Mapping[str, Any] | None) -> float:
    """The tick (seconds) a planner's heartbeat says it keeps; a minute if it says none."""
    tick = (info or {}).get("tick")
    return float(tick) if isinstance(tick, int | float) and tick > 0 else 60.0


def planners_look_within_ms(now_ms: int, planners: Iterable[tuple[int, float]]) -> int | None:
    """Within how long from ``now_ms`` every live planner of ``planners`` (each seen at, and
    its tick in seconds) has looked at the runtime schedules again: the time it may be
    silent and still live (:func:`planner_stale_ms`), two ticks and a slack, as a tick
    under way may have read past a schedule written now. None if no planner is live."""
    within = [planner_stale_ms(tick) for seen, tick in planners
              if alive(seen, now_ms, planner_stale_ms(tick))]
    return max(within) if within else None


def this_host() -> str:
    """This machine's name as fire ids and key names may carry it (the each-host pool)."""
    name = re.sub(r"[^A-Za-z0-9._-]", "-", socket.gethostname()) or "host"
    return name if name[0].isalnum() else "h" + name


def process_id() -> str:
    """``host:pid``: the default id of a planner or worker, unique across the fleet."""
    return f"{socket.gethostname()}:{os.getpid()}"
