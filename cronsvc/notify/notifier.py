"""The notifier: runs the outbox router, delivers messages one channel per thread, and
watches the fleet.

Where it runs: in every planner (``cronsvc planner``, ``cronsvc up``), and alone as
``cronsvc notifier`` (run one beside the workers to hear that no planner is left). Any
number may run; one lease (``Keys.notify_lease``) picks the one that acts, and another
takes over within :data:`LEASE_MS` when it stops.

1. *Route*: the outbox router (:mod:`cronsvc.outbox.router`) reads every shard's outbox
   oldest first and hands each entry to its consumers: the notifications
   (:mod:`cronsvc.notify.messages`), the chains (:mod:`cronsvc.outbox.chains`) and the
   auto-pause (:mod:`cronsvc.outbox.autopause`). So chains and the cross-shard pause need
   a notifier running, as messages do. A message is queued once; only a notifier that
   dies between sending it and recording that sends it again, with the same id
   (``X-Cronsvc-Delivery``), which is the receiver's key.
2. *Deliver*: each channel has its own thread, so a slow or dead endpoint delays only its
   own messages. A failed attempt is tried again after ``retry`` seconds, doubling up to
   ``retry_max``; a message undelivered after ``give_up`` is set aside
   (``Keys.notify_dead``), shown by ``cronsvc status`` and the dashboard.
3. *Watch the fleet*, when the file names ``notifier.fleet`` channels: no live worker or
   no live planner for ``fleet_after`` seconds, or the oldest due fire later than
   ``queue_late``.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
import uuid
from collections.abc import Callable
from typing import Any

import redis

from cronsvc.clock import monotonic, redis_ms
from cronsvc.config.models import Config
from cronsvc.keys import DEFAULT_POOL, Keys, all_shards
from cronsvc.notify.channels import DeliveryError, send
from cronsvc.notify.events import from_json
from cronsvc.notify.messages import Messages
from cronsvc.outbox.autopause import AutoPause
from cronsvc.outbox.chains import Chains
from cronsvc.outbox.router import Router
from cronsvc.presence import WORKER_STALE_MS, alive, planner_stale_ms
from cronsvc.store.faults import REDIS_ERRORS, describe
from cronsvc.store.replies import json_object, text
from cronsvc.store.scripts import Scripts

log = logging.getLogger("cronsvc.notify")

LEASE_MS = 10_000
#: How often the leader routes the outbox, and how often the others look at the lease.
TICK_S = 0.25
#: How often the fleet is looked at.
FLEET_EVERY_S = 5.0
#: Messages a channel thread takes per look at its queue.
DELIVER_BATCH = 20


def notifier_id(role: str) -> str:
    return f"{role}:{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"


class Notifier:
    """One candidate sender; :meth:`start` its threads, :meth:`stop` them."""

    def __init__(self, client: redis.Redis, config: Callable[[], Config], *,
                 role: str = "notifier", watch_planners: bool = False) -> None:
        self.client = client
        self.config = config
        self.scripts = Scripts(client)
        self.id = notifier_id(role)
        self.watch_planners = watch_planners  # a planner's notifier sees itself alive
        self.leader = threading.Event()
        self.stopping = threading.Event()
        self._threads: dict[str, threading.Thread] = {}
        self._main: threading.Thread | None = None
        self._fleet_due = 0.0
        self._since: dict[str, int] = {}  # fleet condition -> when it was first seen
        self._lost = False  # Redis was unreachable at the last look (logged once)
        self.messages = Messages(client, self.scripts, config, self.id, self.leader)
        # The outbox router, run under this lease: the notifications are also the closer,
        # as their messages leave with the routed entries in one script call.
        self.router = Router(client, self.shards, [
            self.messages,
            Chains(client, self.scripts, config),
            AutoPause(client, self.scripts, config),
        ], closer=self.messages)

    # -- settings ------------------------------------------------------------------
    @property
    def home(self) -> Keys:
        c = self.config()
        return all_shards(c.redis.shards, c.redis.prefix)[0]

    def shards(self) -> list[Keys]:
        c = self.config()
        return all_shards(c.redis.shards, c.redis.prefix)

    def now(self) -> int:
        return redis_ms(self.client)

    # -- threads -------------------------------------------------------------------
    def start(self) -> None:
        self._main = threading.Thread(target=self._run, name="cronsvc-notifier", daemon=True)
        self._main.start()

    def stop(self) -> None:
        """Stop sending and give the lease up, so another notifier takes over at once."""
        self.stopping.set()
        if self._main is not None:
            self._main.join(5)
        for thread in self._threads.values():
            thread.join(1)
        if self.leader.is_set():
            try:
                self.scripts.notify_lease(self.home, self.id, 0)
            except REDIS_ERRORS:
                pass
        self.leader.clear()

    def _run(self) -> None:
        log.info("notifier %s started", self.id)
        while not self.stopping.is_set():
            try:
                self.step()
                if self._lost:
                    log.info("notifier: Redis answers again")
                self._lost = False
            except REDIS_ERRORS as exc:
                self.leader.clear()
                if not self._lost:
                    log.warning("notifier: cannot reach Redis, trying again: %s", describe(exc))
                self._lost = True
            except Exception:  # the notifier outlives any one bad pass
                log.exception("notifier pass failed")
            self.stopping.wait(TICK_S)
        log.info("notifier %s stopped", self.id)

    def step(self) -> None:
        """One pass: keep the lease; as leader, route the outbox and watch the fleet. A file
        that gives the router's consumers nothing to do (no channel, no chain, no job
        pausing itself after failures) needs no leader."""
        config = self.config()
        if not self.router.needed(config):
            if self.leader.is_set():
                self.scripts.notify_lease(self.home, self.id, 0)
                self.leader.clear()
            return
        held = self.scripts.notify_lease(self.home, self.id, LEASE_MS)
        if held and not self.leader.is_set():
            log.info("notifier %s sends now", self.id)
        if held:
            self.leader.set()
        else:
            self.leader.clear()
            return
        self._channel_threads()
        self.router.route(self.now())
        if monotonic() >= self._fleet_due:
            after = self.config().notifier.fleet_after
            self._fleet_due = monotonic() + max(0.5, min(FLEET_EVERY_S, after))
            self.watch_fleet()

    def _channel_threads(self) -> None:
        for name in self.config().notify:
            thread = self._threads.get(name)
            if thread is None or not thread.is_alive():
                thread = threading.Thread(target=self._deliver_loop, args=(name,),
                                          name=f"cronsvc-notify-{name}", daemon=True)
                self._threads[name] = thread
                thread.start()

    # -- deliver -------------------------------------------------------------------
    def _deliver_loop(self, channel: str) -> None:
        while not self.stopping.is_set():
            if not self.leader.is_set() or channel not in self.config().notify:
                self.stopping.wait(TICK_S)
                continue
            try:
                sent = self.deliver(channel)
            except REDIS_ERRORS as exc:
                log.warning("notify.%s: cannot reach Redis: %s", channel, describe(exc))
                self.stopping.wait(1.0)
                continue
            if not sent:
                self.stopping.wait(TICK_S)

    def deliver(self, channel: str) -> int:
        """Try the due messages of ``channel`` once each; how many were tried."""
        home = self.home
        now = self.now()
        ids = [text(i) for i in self.client.zrangebyscore(home.notify_due(channel), "-inf",
                                                           now, start=0, num=DELIVER_BATCH)]
        for mid in ids:
            if self.stopping.is_set() or not self.leader.is_set():
                break
            self._deliver_one(home, channel, mid)
        return len(ids)

    def _deliver_one(self, home: Keys, channel: str, mid: str) -> None:
        raw = self.client.hget(home.notify_deliveries, mid)
        if raw is None:  # settled meanwhile
            self.client.zrem(home.notify_due(channel), mid)
            return
        message = json.loads(text(raw))
        event = from_json(message["event"])
        config = self.config()
        spec = config.notify.get(channel)
        try:
            if spec is None:
                raise DeliveryError(f"notify.{channel}: no such channel in the job file now")
            where = send(channel, spec, event)
        except DeliveryError as exc:
            self._failed(home, channel, mid, message, str(exc))
            return
        self.scripts.notify_settle(home, channel, mid, "sent")
        log.info("notify.%s: %s sent to %s", channel, event.title(), where,
                 extra={"job": event.job, "fire": event.fire})

    def _failed(self, home: Keys, channel: str, mid: str, message: dict[str, Any],
                error: str) -> None:
        settings = self.config().notifier
        now = self.now()
        attempts = int(message.get("attempts", 0)) + 1
        message = {**message, "attempts": attempts, "error": error, "last_ms": now}
        body = json.dumps(message, separators=(",", ":"))
        if now - int(message.get("first_ms", now)) >= settings.give_up * 1000:
            self.scripts.notify_settle(home, channel, mid, "dead", body=body)
            log.error("notify.%s: gave up on %s after %d attempts: %s", channel, mid,
                      attempts, error)
            return
        delay = min(settings.retry * 2 ** (attempts - 1), settings.retry_max)
        self.scripts.notify_settle(home, channel, mid, "retry", now + int(delay * 1000), body)
        log.warning("notify.%s: attempt %d of %s failed, next in %.1fs: %s", channel, attempts,
                    mid, delay, error)

    # -- the fleet -----------------------------------------------------------------
    def watch_fleet(self) -> None:
        """Tell the fleet channels when workers or planners are gone, or the queue is late."""
        config = self.config()
        settings = config.notifier
        if not settings.fleet:
            return
        home = self.home
        now = self.now()
        pipe = self.client.pipeline(transaction=False)
        pipe.zrange(home.workers, 0, -1, withscores=True)
        pipe.zrange(home.planners, 0, -1, withscores=True)
        workers, planners = pipe.execute()
        pools = {DEFAULT_POOL, *(job.pool for job in config.jobs.values())}
        dues = [float(first[0][1]) for first in
                (self.client.zrange(keys.with_pool(pool).queue, 0, 0, withscores=True)
                 for keys in self.shards() for pool in pools)
                if first]
        late_ms = max(now - int(min(dues)), 0) if dues else 0
        stale = planner_stale_ms(config.planner.tick)
        conditions = {
            "no_worker": (not any(alive(int(s), now, WORKER_STALE_MS) for _, s in workers),
                          "no live worker: due fires are not run", "live workers again"),
            "queue_late": (settings.queue_late is not None
                           and late_ms > settings.queue_late * 1000,
                           f"the oldest due fire waits {late_ms / 1000:.0f}s",
                           "the queue is on time again"),
        }
        if self.watch_planners:
            conditions["no_planner"] = (
                not any(alive(int(s), now, stale) for _, s in planners),
                "no live planner: no new fires are being planned", "a planner is live again")
        episodes = self.messages.episodes(home)
        told = []
        for kind, (active, begun, ended) in conditions.items():
            if active:
                since = self._since.setdefault(kind, now)
                active = now - since >= settings.fleet_after * 1000 or kind == "queue_late"
            else:
                self._since.pop(kind, None)
            t = episodes.condition(kind, active, now, begun if active else ended)
            if t is not None:
                told.append(t)
        if told or episodes.changed:
            self.messages.queue(home, 0, episodes, self.messages.render(told, now))


def pending(client: redis.Redis, home: Keys, shards: list[Keys]) -> dict[str, Any]:
    """What waits to be told: outbox entries, messages queued, and those given up on."""
    pipe = client.pipeline(transaction=False)
    for keys in shards:
        pipe.llen(keys.outbox)
    pipe.hlen(home.notify_deliveries)
    pipe.hgetall(home.notify_dead)
    *outboxes, queued, dead = pipe.execute()
    undelivered: list[dict[str, Any]] = []
    for mid, raw in dead.items():
        message = json_object(raw)
        if message is None:
            continue
        event = message["event"] if isinstance(message.get("event"), dict) else {}
        last = message.get("last_ms")
        undelivered.append({"id": text(mid), "channel": message.get("channel"),
                            "job": event.get("job"), "event": event.get("event"),
                            "attempts": message.get("attempts"), "error": message.get("error"),
                            "last_ms": last if isinstance(last, int) else None})
    undelivered.sort(key=lambda u: -(u["last_ms"] or 0))
    return {"outbox": sum(int(n) for n in outboxes), "queued": int(queued),
            "undelivered": undelivered}
