"""The dispatch scenario's parts: `celery:` jobs every second, the Celery broker (a
redis-server of its own, with its AOF) and real Celery workers on it, the fire a kill
hurts most, and what the copies of the messages say.

A fire of a `celery:` job is run by a Celery worker (tests/chaos/celery_tasks.py), which
writes the chaos ledger as a `call` job does: the judge (tests/chaos/ledger.py) reads it
unchanged. What it cannot see is how many copies of a message arrived: the workers note
each copy they took (run, or skipped by the guard), and :func:`count_copies` adds them up.
A dispatched fire may be *sent* twice (its dispatcher killed after the send); it must
never *run* twice.
"""

from __future__ import annotations

import collections
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import redis

from cronsvc.fires import parse_fire
from cronsvc.keys import Keys
from cronsvc.process.redis_server import RedisServer
from cronsvc.store.replies import json_object
from cronsvc.testing import read_ledger
from tests.chaos.celery_tasks import copies_path
from tests.support.queues import QueueWorker, celery_worker
from tests.support.wait import wait_for

K = Keys()
JOBS = 3  # every second each: about three fires a second for two solo consumers
LONGEST_MS = 600  # a task's work: long enough that messages wait in the queue at times
CONSUMERS = 2
# Longer than the longest outage plus a queue's wait: an outcome that does not come back
# within it is a fire recorded `timeout`, and the judge finds it ran or counts it lost.
TIMEOUT = "15s"


def dispatch_jobs(broker_url: str) -> dict[str, Any]:
    """Every-second `celery:` jobs sending ``chaos.work`` to ``broker_url``; every fire
    runs, however late (``catch_up: all``), so each one missing is lost."""
    return {f"celery-{i}": {
        "cron": "* * * * * *", "timeout": TIMEOUT, "catch_up": "all",
        "celery": {"task": "chaos.work", "broker": broker_url,
                   "kwargs": {"longest_ms": LONGEST_MS}},
    } for i in range(JOBS)}


class Consumers:
    """The Celery broker and its workers (``--pool solo``), all running until closed."""

    def __init__(self, tmp: Path, broker: RedisServer, redis_url: str, ledger: str) -> None:
        self.tmp = tmp
        self.broker = broker
        self.redis_url = redis_url
        self.ledger = Path(ledger)
        self.workers: list[QueueWorker] = []
        self._stack = ExitStack()

    def start(self, count: int = CONSUMERS) -> None:
        for i in range(count):
            worker = self._stack.enter_context(celery_worker(
                self.tmp, self.broker.url, self.redis_url, self.ledger, name=f"celery-{i}",
                app="tests.chaos.celery_tasks"))
            self.workers.append(worker)
        for worker in self.workers:  # ready: consuming from the broker
            wait_for(lambda w=worker: " ready." in w.log() or w.proc.poll() is not None,
                     timeout=60, message="a Celery worker to be ready")

    def exited(self) -> list[str]:
        return [f"celery worker {w.log_path.stem} exited with {w.proc.returncode}"
                for w in self.workers if w.proc.poll() is not None]

    def logs(self) -> str:
        return "\n".join(f"--- {w.log_path.stem}\n{w.log()[-3000:]}" for w in self.workers)

    def close(self) -> None:
        self._stack.close()


def sending_holder(r: redis.Redis) -> str | None:
    """The worker holding a fire whose message is sent (or being sent) and not started by
    a consumer yet, if any: its kill -9 lands between the send and the ack."""
    for fid in r.zrange(K.working, 0, -1):
        last = r.xrevrange(K.deliveries(str(fid)), count=1)
        if last and last[0][1].get("state") in ("sending", "sent"):
            claim = json_object(r.hget(K.claims, str(fid)) or "")
            if claim and isinstance(claim.get("worker"), str):
                return str(claim["worker"])
    return None


@dataclass
class Copies:
    """What the consumers took: copies of messages per fire, and which ones ran."""

    taken: int = 0  # copies of messages the Celery workers took
    fires: int = 0  # fires with at least one copy
    resent: int = 0  # fires whose message arrived more than once
    extra: int = 0  # copies beyond a fire's first
    skipped: int = 0  # copies the guard skipped: a second delivery
    resent_by_holder: int = 0  # history: a new holder sent the delivery again
    undecided: list[str] = field(default_factory=list)  # ended in an error
    twice: list[str] = field(default_factory=list)  # fires whose task started twice

    def lines(self) -> list[str]:
        return [
            f"messages taken by the Celery workers: {self.taken} copies of {self.fires} fires",
            f"fires sent more than once: {self.resent} ({self.extra} extra copies; "
            f"{self.resent_by_holder} resent by a new holder of the fire)",
            f"copies skipped by the guard: {self.skipped}",
            f"copies that ended in an error (the guard could not reach Redis): "
            f"{len(self.undecided)}",
            f"fires run twice: {len(self.twice)}",
        ]


def count_copies(ledger: str, history: list[dict[str, Any]], start_ms: int, end_ms: int
                 ) -> Copies:
    """The copies in which each fire due in (start_ms, end_ms] arrived, from the
    consumers' notes, the ledger's starts, and the resends the dispatchers' history
    records."""

    def judged(fid: Any) -> bool:
        return isinstance(fid, str) and start_ms < parse_fire(fid)[1] <= end_ms

    out = Copies()
    per_fire: collections.Counter[str] = collections.Counter()
    for c in read_ledger(copies_path(ledger)):
        if not judged(c["fire"]):
            continue
        out.taken += 1
        per_fire[str(c["fire"])] += 1
        out.skipped += bool(c["skipped"])
        if c["state"] != "SUCCESS":
            out.undecided.append(f"{c['fire']} attempt {c['attempt']} pid {c['pid']}: "
                                 f"{c['state']} {c.get('error', '')}")
    out.fires = len(per_fire)
    out.resent = sum(n > 1 for n in per_fire.values())
    out.extra = sum(n - 1 for n in per_fire.values())
    starts = collections.Counter(e["fire"] for e in read_ledger(ledger)
                                 if e["event"] == "start" and judged(e["fire"]))
    out.twice = [f"{fid}: {n} starts" for fid, n in sorted(starts.items()) if n > 1]
    out.resent_by_holder = sum(str(h.get("output") or "").startswith("resent ")
                               for h in history if judged(h.get("fire")))
    return out

