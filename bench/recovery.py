"""Recovery: from kill -9 of a worker in the middle of a job to the same fire
starting again on another worker, against the lease length.

Two workers; a one-off fire of a job that blocks until released; the worker
that starts it is killed at a random point of its lease, and the time to the
second attempt's start is read from the run ledger the job writes
(``cronsvc/testing/ledger.py``, one line per start, outside Redis).

Reference: the lease itself; a killed holder's lease lapses at most one lease
after its last renewal, and the surviving worker sleeps until that deadline.

Run: ``.venv/bin/python -m bench.recovery``
"""

from __future__ import annotations

import random
import signal
import time
from pathlib import Path

from bench import common
from bench.common import Figure, Section
from cronsvc.testing import BLOCK, history, read_ledger, wait_for

TRIALS = ((2.0, 3), (5.0, 2), (30.0, 1))  # (lease in seconds, trials); 30 s is the default
SLACK_MS = 100  # target: back within the lease plus this


def trial(lease: float, rnd: random.Random) -> float:
    """Seconds from the kill to the second attempt's start."""
    with common.redis_server() as (server, r), common.fleet(server.url, {}) as f:
        f.write({"slow": f.call_job("0 0 1 1 *", call=BLOCK)})
        for name in ("worker-a", "worker-b"):
            f.worker(name, "--lease", f"{lease:g}")
        common.wait_workers(r, 2)
        fid = f.trigger("slow")
        first = wait_for(lambda: read_ledger(f.ledger), 30, message="the first attempt")[0]
        assert first["fire"] == fid and first["attempt"] == 1, first
        # Anywhere in the lease: a renewal may just have happened, or be due.
        pause = time.monotonic() + rnd.uniform(0, lease)
        wait_for(lambda: time.monotonic() >= pause, lease + 1, interval=0.001,
                 message="the moment to kill")
        killed_ms = time.time_ns() // 1_000_000
        f.signal(first["worker"], signal.SIGKILL)
        again = wait_for(lambda: [e for e in read_ledger(f.ledger) if e["attempt"] == 2],
                         lease + 30, message="the second attempt")[0]
        Path(f.release).touch()
        wait_for(lambda: [h for h in history(r, "slow") if h["status"] == "ok"], 30,
                 message="the second attempt to finish")
        assert again["fire"] == fid and again["worker"] != first["worker"], again
        return (again["at_ms"] - killed_ms) / 1000


def measure(trials: tuple[tuple[float, int], ...] = TRIALS, seed: int = 6) -> Section:
    section = Section("Recovery after kill -9 of a worker mid-job")
    rnd = random.Random(seed)
    for lease, count in trials:
        times = [trial(lease, rnd) for _ in range(count)]
        worst = max(times)
        section.figures.append(Figure(
            f"recovery, lease {lease:g} s", ", ".join(f"{t:.2f} s" for t in times)
            + f" (worst {worst / lease:.2f} of the lease)",
            f"<= lease + {SLACK_MS} ms", f"lease {lease:g} s",
            worst <= lease + SLACK_MS / 1000))
    section.notes.append("kill at a uniformly random point of the lease; workers renew "
                         "leases every third of the lease")
    return section


if __name__ == "__main__":
    common.cli(__doc__, measure)
