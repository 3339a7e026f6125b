"""Every Redis key name cronsvc uses, and nothing else.

Single-instance defaults are the contract names ``cron:queue`` and
``scheduler:working``. With ``shards: N`` every per-shard key carries the
hash tag ``{k}`` so one script never crosses Redis Cluster slots; per-job keys
of a shard carry the same tag. A worker pool other than ``default`` has a queue and a
working set of its own on each shard (``cron:queue:gpu``, ``scheduler:working:gpu``,
with the shard's tag); every other key is shared by the pools of a shard.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, replace

#: The pool of a job that names none, and of a worker that serves none: the contract keys.
DEFAULT_POOL = "default"
#: The pool of a job that runs once on each live worker host: every worker copies each of
#: its fires into the pool of its own host (:func:`host_pool`) and runs it from there.
EACH_HOST = "each-host"
#: The one field of :attr:`Keys.attempts` that is no fire id: the claim script writes it
#: with a value longer than Redis keeps in a compact hash, so that the hash stays a hash
#: table (a compact one is scanned whole on every lookup). Its twin is
#: ``lua/includes/leases.lua``.
ATTEMPTS_PIN = "~pin"


def host_pool(host: str) -> str:
    """The pool of one host's runs of each-host fires."""
    return "@" + host


def stable_hash(name: str) -> int:
    """A hash that is the same in every process and Python version."""
    return zlib.crc32(name.encode())


@dataclass(frozen=True)
class Keys:
    """Key names of one shard (``shard=None``: the plain single-instance names), and of one
    pool's queue and working set there."""

    prefix: str = ""
    shard: int | None = None
    pool: str = DEFAULT_POOL

    def with_pool(self, pool: str) -> Keys:
        """The same shard, the queue and working set of ``pool``."""
        return self if pool == self.pool else replace(self, pool=pool)

    def _pooled(self, name: str) -> str:
        return self._k(name if self.pool == DEFAULT_POOL else f"{name}:{self.pool}")

    def _k(self, name: str) -> str:
        tag = "" if self.shard is None else f"{{{self.shard}}}"
        return f"{self.prefix}{name}{tag}"

    # -- per shard ----------------------------------------------------------
    @property
    def queue(self) -> str:
        """zset: fire id -> due time (ms), of this pool."""
        return self._pooled("cron:queue")

    @property
    def working(self) -> str:
        """zset: fire id -> lease deadline (ms), of this pool."""
        return self._pooled("scheduler:working")

    @property
    def claims(self) -> str:
        """hash: fire id -> JSON of the claim (token, worker, due, claimed at, payload)."""
        return self._k("cron:claims")

    @property
    def attempts(self) -> str:
        """hash: fire id -> attempt count, the fencing token of the current claim; and
        :data:`ATTEMPTS_PIN`, no fire."""
        return self._k("cron:attempts")

    @property
    def watermarks(self) -> str:
        """hash: job -> due time (ms) of the last fire planned."""
        return self._k("cron:planned")

    @property
    def jobs(self) -> str:
        """hash: job -> published policy line (digest, catch-up, deadline, overlap)."""
        return self._k("cron:jobs")

    @property
    def job_lines(self) -> str:
        """hash: job -> policy line of every job of the file, on every shard: what the claims
        of runtime schedule fires read of a job another shard publishes. On one Redis it is
        ``jobs`` itself."""
        return self.jobs if self.shard is None else self._k("cron:job-lines")

    @property
    def specs(self) -> str:
        """hash: job -> JSON of the published schedule (cron, timezone, jitter)."""
        return self._k("cron:specs")

    @property
    def paused(self) -> str:
        """hash: job -> JSON of the pause (note, since)."""
        return self._k("cron:paused")

    @property
    def running(self) -> str:
        """hash: job -> fire id of its run in flight (jobs with overlap forbid/replace)."""
        return self._k("cron:running")

    @property
    def cancels(self) -> str:
        """hash: fire id -> reason; the holder stops that run at its next heartbeat."""
        return self._k("cron:cancels")

    @property
    def payloads(self) -> str:
        """hash: fire id -> payload JSON of one-off runs."""
        return self._k("cron:payloads")

    @property
    def dead(self) -> str:
        """zset: fire id -> time it died (ms)."""
        return self._k("cron:dead")

    @property
    def malformed(self) -> str:
        """list: entries read back from this shard that were not what their key holds (a
        queue member that is not a fire id), set aside by whoever found them: JSON lines
        (cronsvc/malformed.py), newest first, capped."""
        return self._k("cron:malformed")

    @property
    def events(self) -> str:
        """list: capped log of every decision scripts take (JSON lines, newest first)."""
        return self._k("cron:events")

    @property
    def published(self) -> str:
        """string: the generation (see ``generation``) whose definitions this shard holds."""
        return self._k("cron:published")

    @property
    def schedules(self) -> str:
        """hash: runtime schedule id -> its stored line (cronsvc/schedule/runtime.py)."""
        return self._k("cron:schedules")

    @property
    def schedule_marks(self) -> str:
        """zset: runtime schedule id -> planned up to (ms): every fire of the schedule due at
        or before it is planned; the planner looks at those below now + horizon."""
        return self._k("cron:schedule-marks")

    @property
    def schedule_counts(self) -> str:
        """hash: job -> how many runtime schedules of this shard run it."""
        return self._k("cron:schedule-counts")

    @property
    def outbox(self) -> str:
        """list: events to tell people about, chains and automatic pauses (JSON,
        cronsvc/outbox/entries.py), newest first; pushed by the script that records the
        outcome, drained by the outbox router the notifier runs (cronsvc/outbox/router.py)."""
        return self._k("cron:outbox")

    @property
    def failing(self) -> str:
        """hash: job -> fires failed in a row (0: only an attempt failed), for jobs that
        notify or pause after failures; the next success removes it."""
        return self._k("cron:failing")

    @property
    def slots(self) -> str:
        """hash: ``o:<owner>`` (a job, or ``!<schedule id>``) or ``l:<limit>`` -> the fires
        holding its slots, ``|``-separated (one no longer leased holds none); ``w:<owner>``
        -> its one fire waiting for a slot (``overlap: queue``)."""
        return self._k("cron:slots")

    @property
    def chained(self) -> str:
        """zset: fire id -> when it was queued (ms), of the chain fires queued in the last
        7 days: an upstream end read twice never queues its downstream fire again."""
        return self._k("cron:chained")

    @property
    def each_host_marks(self) -> str:
        """hash: fire id of the each-host pool -> ``|host|host|``, the hosts that took their
        copy of it (kept while the fire stays in that pool's queue)."""
        return self._k("cron:each-host")

    def held(self, digest: str) -> str:
        """hash: job -> definition digest, of the jobs of this shard in the job file whose
        held-definitions digest is ``digest`` (written by its workers, expiring unless renewed)."""
        return self._k(f"cron:held:{digest}")

    def ran(self, owner: str, period: int) -> str:
        """string: the record of the fires of ``owner`` (a job, or ``!<schedule id>``) that
        ran, due in one period of :data:`cronsvc.ran.PERIOD_MS` (its number ``period``):
        4 bytes per fire (cronsvc/ran.py), expiring a while after the period ends."""
        return self._k("cron:ran") + f":{owner}:{period}"

    def deliveries(self, fire_id: str) -> str:
        """stream: the deliveries of one dispatched fire and their outcomes, written by
        ``lua/dispatch-1.lua`` only (cronsvc/run/dispatch.py), expiring a day after the
        last."""
        return self._k("cron:deliveries") + ":" + fire_id

    def history(self, job: str) -> str:
        """list: the job's last runs, newest first (JSON), capped."""
        return self._k("cron:history") + ":" + job

    def output(self, fire_id: str) -> str:
        """hash: attempt -> the output a run of one fire kept (its head and tail), written
        with its history record by ``lua/ack-8+.lua`` and ``lua/fail-14.lua``, expiring
        after the output retention."""
        return self._k("cron:output") + ":" + fire_id

    def live(self, fire_id: str) -> str:
        """stream: the output of one fire's runs while they go (chunks, each with its
        attempt; an ``end`` entry once a run is over), capped, expiring a minute after a
        run's end (cronsvc/worker/live.py)."""
        return self._k("cron:live") + ":" + fire_id

    # -- fleet wide (shard 0 in cluster mode, so they live somewhere fixed) --
    @property
    def workers(self) -> str:
        """zset: worker id -> last heartbeat (ms)."""
        return self._k("cron:workers")

    @property
    def worker_info(self) -> str:
        """hash: worker id -> JSON (busy slots, slots, pid)."""
        return self._k("cron:worker-info")

    @property
    def planners(self) -> str:
        """zset: planner id -> last heartbeat (ms)."""
        return self._k("cron:planners")

    @property
    def planner_info(self) -> str:
        """hash: planner id -> JSON (last tick, jobs, fires added, horizon)."""
        return self._k("cron:planner-info")

    @property
    def generation(self) -> str:
        """hash: the newest published job file: gen (a counter), digest, planner, at (ms), jobs."""
        return self._k("cron:generation")

    @property
    def generations(self) -> str:
        """hash: job file digest -> the generation it was last published as."""
        return self._k("cron:generations")

    @property
    def audit(self) -> str:
        """list: JSON of every operator action (who, what, when, note), newest first, capped."""
        return self._k("cron:audit")

    @property
    def notify_lease(self) -> str:
        """string: the notifier that sends now (one at a time), expiring unless renewed."""
        return self._k("cron:notify:lease")

    @property
    def notify_deliveries(self) -> str:
        """hash: delivery id (event id and channel) -> JSON of a message not yet delivered."""
        return self._k("cron:notify:deliveries")

    def notify_due(self, channel: str) -> str:
        """zset: delivery id -> when to try it (ms), of one channel."""
        return self._k("cron:notify:due") + ":" + channel

    @property
    def notify_sent(self) -> str:
        """zset: delivery id -> when it was delivered (ms), kept a day: never sent twice."""
        return self._k("cron:notify:sent")

    @property
    def notify_dead(self) -> str:
        """hash: delivery id -> JSON of a message given up on (its last error)."""
        return self._k("cron:notify:dead")

    @property
    def notify_episodes(self) -> str:
        """hash: job and event -> JSON of its episode (first sent, repeats folded since)."""
        return self._k("cron:notify:episodes")

    @property
    def wakeup(self) -> str:
        """pub/sub channel: a message wakes sleeping workers (new job, trigger now)."""
        return self._k("cron:wakeup")


def shard_of(job: str, shards: int) -> int | None:
    """Shard of a job, or None when not sharded."""
    if shards <= 1:
        return None
    return stable_hash(job) % shards


def keys_for(job: str, shards: int = 1, prefix: str = "", pool: str = DEFAULT_POOL) -> Keys:
    return Keys(prefix=prefix, shard=shard_of(job, shards), pool=pool)


def all_shards(shards: int = 1, prefix: str = "") -> list[Keys]:
    if shards <= 1:
        return [Keys(prefix=prefix)]
    return [Keys(prefix=prefix, shard=k) for k in range(shards)]
