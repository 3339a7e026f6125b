"""Trigger latency: from `cronsvc trigger` (Client.trigger) to the run's start,
on an idle fleet of 2 workers that are asleep when the trigger comes.

A trigger is a one-off fire due at the server's now; its lag (start minus
scheduled time, both on the Redis clock) is the latency. The workers wake on
the trigger's pub/sub message, not on their next periodic look (up to 5 s).

Reference: the idle `call` job lag of a scheduled fire (bench/lag.py), which
needs no wake-up message.

Run: ``.venv/bin/python -m bench.trigger [--triggers 50]``
"""

from __future__ import annotations

import random
import time

from bench import common
from bench.common import Figure, Section
from cronsvc.client.client import Client
from cronsvc.testing import history, wait_for

TARGET_MS = 100


def measure(triggers: int = 50, seed: int = 7) -> Section:
    section = Section("Trigger latency (idle fleet, 2 workers)")
    rnd = random.Random(seed)
    with common.redis_server() as (server, r), common.fleet(server.url, {}) as f:
        f.write({"manual": common.noop_job("0 0 1 1 *")})
        for name in ("worker-a", "worker-b"):
            f.worker(name)
        common.wait_workers(r, 2)
        client = Client(server.url, config=str(f.config))
        client.publish_config()
        lags = []
        for i in range(triggers):
            # Land anywhere in the workers' sleep, so none happens to be awake.
            pause = time.monotonic() + rnd.uniform(0.2, 1.0)
            wait_for(lambda at=pause: time.monotonic() >= at, 5, interval=0.005,
                     message="the moment to trigger")
            fid = client.trigger("manual")
            rec = wait_for(lambda fid=fid: [h for h in history(r, "manual") if h["fire"] == fid],
                           30,
                           message=f"trigger {i} to run")[0]
            lags.append(rec["started"] - rec["scheduled"])
    lags.sort()
    p50, p99, worst = common.lag_summary(lags)
    section.figures.append(Figure(
        "trigger to start", f"p50 {p50:.0f} ms, p99 {p99:.0f} ms, max {worst:.0f} ms "
        f"({len(lags)} triggers)", f"< {TARGET_MS} ms", "scheduled fires need no wake-up: "
        "see the idle `call` job lag", worst < TARGET_MS))
    section.notes.append("each trigger 0.2-1.0 s after the previous run; workers at default "
                         "settings (asleep up to 5 s between looks at Redis)")
    return section


if __name__ == "__main__":
    common.cli(__doc__, measure, triggers=50)
