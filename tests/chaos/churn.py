"""Schedule churn during a chaos run: runtime schedules created, changed and deleted at a
steady rate from a client, each call logged with when it was sent and when it returned.

A call that fails (Redis down or refusing writes) may or may not have taken effect: the
schedule is read back until Redis answers, and the log says what it then was, with the
whole while in which either definition may have been in force.
"""

from __future__ import annotations

import random
import threading
import time
from typing import Any

from cronsvc.client.client import Client
from cronsvc.errors import UnknownSchedule
from tests.chaos.ledger import Change, Definition
from tests.support.wait import wait_for

JOB = "latest-0"  # in every version of the chaos file
IDS = 6
EVERY_S = (1, 2)
PAUSE_S = (0.08, 0.25)  # between calls
PATIENCE_S = 60.0  # for Redis to answer again after a fault


def now_ms() -> int:
    return time.time_ns() // 1_000_000


class Churn:
    """A thread that upserts, changes and deletes schedules ``churn:0..5`` of ``JOB``, then
    deletes them all when told to stop."""

    def __init__(self, redis_url: str, seed: int) -> None:
        self.client = Client(redis_url)
        self.rnd = random.Random(seed)
        self.changes: list[Change] = []
        self.live: dict[str, Definition] = {}
        self.version = 0
        self.stopping = threading.Event()
        self.errors = 0
        self.failure: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="churn", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """Stop, delete what lives, and raise what went wrong in the thread."""
        self.stopping.set()
        self._thread.join(PATIENCE_S * 3)
        assert not self._thread.is_alive(), "the churn thread did not stop"
        if self.failure is not None:
            raise self.failure

    # -- the calls -----------------------------------------------------------------
    def _run(self) -> None:
        try:
            self._churn()
        except BaseException as exc:  # noqa: BLE001 - raised again by stop()
            self.failure = exc

    def _churn(self) -> None:
        while not self.stopping.wait(self.rnd.uniform(*PAUSE_S)):
            sid = f"churn:{self.rnd.randrange(IDS)}"
            old = self.live.get(sid)
            if old is not None and self.rnd.random() < 0.25:
                self._call(sid, None)
            elif old is not None and self.rnd.random() < 0.4:
                self._call(sid, self._definition(old.every_ms, old.anchor_ms))  # payload only
            else:
                every = self.rnd.choice(EVERY_S) * 1000
                self._call(sid, self._definition(every, now_ms() + self.rnd.randrange(every)))
        for sid in sorted(self.live):
            self._call(sid, None)

    def _definition(self, every_ms: int, anchor_ms: int) -> Definition:
        self.version += 1
        return Definition(JOB, every_ms, anchor_ms, self.version)

    def _call(self, sid: str, new: Definition | None) -> None:
        t0 = now_ms()
        try:
            if new is None:
                self.client.delete_schedule(sid)
            else:
                self.client.upsert_schedule(sid, job=new.job, every=new.every_ms // 1000,
                                            anchor=new.anchor_ms, payload={"v": new.version})
            after = new
        except Exception:  # noqa: BLE001 - any failure: read back what it did
            self.errors += 1
            after = self._read_back(sid)
        self.changes.append(Change(sid, t0, now_ms(), after))
        if after is None:
            self.live.pop(sid, None)
        else:
            self.live[sid] = after

    def _read_back(self, sid: str) -> Definition | None:
        found: dict[str, Any] = {}

        def read() -> bool:
            try:
                found["s"] = self.client.get_schedule(sid)
            except UnknownSchedule:
                found["s"] = None
            except Exception:  # noqa: BLE001 - Redis is still away
                return False
            return True

        wait_for(read, timeout=PATIENCE_S, interval=0.05,
                 message=f"Redis to answer, to read back {sid}")
        s = found["s"]
        if s is None:
            return None
        return Definition(s.job, int(s.every_ms or 0), int(s.anchor_ms or 0),
                          int(s.payload["v"]))

    def close(self) -> None:
        self.client.redis.close()
