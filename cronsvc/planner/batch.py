"""The fires a tick plans on one shard, sent in calls of bounded size."""

from __future__ import annotations

from cronsvc.config.models import Job
from cronsvc.keys import Keys
from cronsvc.store.scripts import Scripts


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
