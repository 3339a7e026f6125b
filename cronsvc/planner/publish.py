"""What a planner sends to Redis: job definitions, and fires in bounded batches.

The claim script decides from the published policy line alone (it cannot read
the YAML), so this module is the single place that turns a :class:`Job` into
that line and into the schedule spec the next planner compares against.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

from cronsvc.config.models import Job
from cronsvc.fires import fire_id
from cronsvc.keys import DEFAULT_POOL, Keys
from cronsvc.policy import Policy, digest_of
from cronsvc.schedule.expand import Spec, occurrences_ms
from cronsvc.store.scripts import Scripts

log = logging.getLogger("cronsvc.planner")

ABSENT = "-"  # expected digest of a job that is not published yet


def policy_line(job: Job) -> str:
    """The job's published policy line (:mod:`cronsvc.policy`)."""
    return Policy.of(job).format()


def spec_json(job: Job) -> str:
    """The schedule-defining fields, enough to expand the job's fires again later."""
    return json.dumps(job.spec, separators=(",", ":"))


@dataclass
class Published:
    """What one shard holds about its jobs, read in one round trip."""

    lines: dict[str, str]
    specs: dict[str, str]
    watermarks: dict[str, str]
    lowest: dict[str, int]  # pool -> the lowest score of its queue (absent: empty)
    # Keys.job_lines of a sharded fleet (the lines of every job); None on one Redis
    mirror: dict[str, str] | None = None


@dataclass
class Changes:
    """Arguments of one shard's publish call."""

    sets: list[tuple[str, str, str, str]] = field(default_factory=list)  # job, old, line, spec
    removals: list[tuple[str, str]] = field(default_factory=list)  # job, old digest
    # (job, why, its queued fires of the old definition, the pool whose queue holds them):
    # why is removed or replaced
    unqueue: list[tuple[str, str, list[str], str]] = field(default_factory=list)
    mirror: list[tuple[str, str]] = field(default_factory=list)  # job, line (every job)
    unmirror: list[str] = field(default_factory=list)  # jobs no longer in the file

    def __bool__(self) -> bool:
        return bool(self.sets or self.removals or self.unqueue or self.mirror or self.unmirror)

    @property
    def fires(self) -> int:
        """Fires to unqueue."""
        return sum(len(fires) for _, _, fires, _ in self.unqueue)

    def chunks(self, size: int) -> Iterator[Changes]:
        """The changes as calls of at most ``size`` fires each; jobs all go in the first.

        Definitions and the first fires share one atomic call, so in the common
        case no worker can claim an old fire after its job changed.
        """
        part = Changes(self.sets, self.removals, mirror=self.mirror, unmirror=self.unmirror)
        room = size
        for job, why, fires, pool in self.unqueue:
            while fires:
                if room == 0:
                    yield part
                    part, room = Changes(), size
                head, fires = fires[:room], fires[room:]
                part.unqueue.append((job, why, head, pool))
                room -= len(head)
        yield part


def diff(wanted: Mapping[str, Job], have: Published, now_ms: int, horizon_ms: int,
         every: Mapping[str, Job] | None = None) -> Changes:
    """Publish calls that make ``have`` match ``wanted`` (the jobs of this shard), with the
    old fires to unqueue; and its mirror match ``every`` job of the file, if it has one."""
    out = Changes()
    if have.mirror is not None and every is not None:
        lines = {name: policy_line(job) for name, job in every.items()}
        out.mirror = [(n, line) for n, line in lines.items() if have.mirror.get(n) != line]
        out.unmirror = [n for n in have.mirror if n not in lines]
    for name, job in wanted.items():
        line = policy_line(job)
        old = have.lines.get(name)
        if old == line:
            continue
        old_digest = digest_of(old) if old else ABSENT
        out.sets.append((name, old_digest, line, spec_json(job)))
        if old and old_digest != job.digest:
            out.unqueue.append((name, "replaced", *old_fires(name, have, now_ms, horizon_ms)))
    for name, old in have.lines.items():
        if name not in wanted:
            out.removals.append((name, digest_of(old)))
            out.unqueue.append((name, "removed", *old_fires(name, have, now_ms, horizon_ms)))
    return out


def old_fires(name: str, have: Published, now_ms: int, horizon_ms: int
              ) -> tuple[list[str], str]:
    """Fire ids the old definition of ``name`` may have queued, and the pool whose queue
    holds them.

    Expanded from that queue's lowest score (nothing is queued before it) up to
    the old watermark, or to our own horizon if that is later: another planner
    may raise the watermark between our read and our publish.
    """
    pool = Policy.parse(have.lines[name]).pool if name in have.lines else DEFAULT_POOL
    return _old_fires(name, have, now_ms, horizon_ms, have.lowest.get(pool)), pool


def _old_fires(name: str, have: Published, now_ms: int, horizon_ms: int,
               lowest: int | None) -> list[str]:
    raw = have.specs.get(name)
    if lowest is None or raw is None:
        return []
    try:
        spec = Spec.from_published(name, json.loads(raw))
        upto = max(int(have.watermarks.get(name) or 0), now_ms + horizon_ms)
        if upto < lowest:
            return []
        # occurrences_ms is strictly after its start: step back one ms to keep the lowest.
        return [fire_id(name, due) for due in occurrences_ms(spec, lowest - 1, upto)]
    except Exception as exc:  # a spec an older version wrote must not stop publishing
        log.warning("job %s: cannot expand its old schedule %s (%s); its queued fires stay",
                    name, raw, exc)
        return []


class PlanBatch:
    """The plan calls of one shard, each carrying at most ``limit`` fires.

    Redis serves nobody while a script runs, so a big expansion (a per-second
    job, thousands of jobs) goes in several short calls.
    """

    def __init__(self, scripts: Scripts, keys: Keys, limit: int) -> None:
        self.scripts = scripts
        self.keys = keys
        self.limit = limit
        self.added = 0
        self.stale: list[str] = []
        self.earliest: int | None = None  # first due of the calls that added fires
        self._entries: list[tuple[str, str, int, list[int]]] = []
        self._size = 0

    def add(self, job: Job, dues: list[int], upto: int) -> None:
        """Plan ``dues`` (ascending, all after the watermark) and raise the watermark to upto."""
        while len(dues) > self.limit - self._size:
            room = self.limit - self._size
            head, dues = dues[:room], dues[room:]
            # The watermark rises to this part's last fire only, so the rest still follows.
            self._entries.append((job.name, job.digest, head[-1], head))
            self._size += room
            self.flush()
        self._entries.append((job.name, job.digest, upto, dues))
        self._size += max(len(dues), 1)  # a job without fires still costs the call some work
        if self._size >= self.limit:
            self.flush()

    def flush(self) -> None:
        """Send what is pending."""
        if not self._entries:
            return
        result = self.scripts.plan(self.keys, self._entries)
        self.added += result.added
        self.stale += result.stale
        firsts = [dues[0] for *_, dues in self._entries if dues]
        if result.added and firsts:
            self.earliest = min([*firsts, self.earliest or firsts[0]])
        self._entries = []
        self._size = 0
