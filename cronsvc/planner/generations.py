"""Which job file the planners publish when they hold different ones.

During a rolling deploy two job files run side by side. Planners must not
undo each other (one removing the jobs the other just added), so a file is
published as a numbered *generation*, and the newest generation wins:

- A planner publishes its file when nothing is published yet, when its file
  changed under it (an edit, a reload), or when the file was never published
  before (a deploy of a new file).
- A planner whose file was published before and then replaced by another
  (an older planner still running, or restarted, mid-deploy) does not publish
  it again while a live planner holds the newest file. It plans only the jobs
  both files define alike, and says so every tick.
- Once no live planner holds the newest file (the deploy it came with was
  rolled back and its planners are gone), the next planner publishes its own.

Pure: the caller reads the fleet's state from Redis and passes it in.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field


class Verdict(enum.Enum):
    PUBLISH = "publish"  # make this file the newest generation and write it
    CURRENT = "current"  # this file is the newest generation: keep it in sync
    YIELD = "yield"  # another file is newer and held by a live planner: publish nothing


@dataclass(frozen=True)
class Newest:
    """The newest published generation (``gen`` 0: nothing published yet)."""

    gen: int = 0
    digest: str | None = None
    planner: str | None = None
    at_ms: int | None = None
    jobs: int | None = None

    @classmethod
    def of(cls, raw: Mapping[str, str]) -> Newest:
        """The generation ``Keys.generation`` holds (empty: none published yet)."""
        if not raw.get("gen"):
            return cls()
        return cls(int(raw["gen"]), raw.get("digest"), raw.get("planner"),
                   int(raw["at"]) if raw.get("at") else None,
                   int(raw["jobs"]) if raw.get("jobs") else None)


def decide(digest: str, newest: Newest, *, published_as: int | None, changed: bool,
           newest_held: bool) -> Verdict:
    """What a planner holding the file ``digest`` does.

    ``published_as``: the generation this file was last published as (None: never);
    ``changed``: the planner's file changed since it last decided; ``newest_held``: a
    live planner holds the newest file (or published it a moment ago).
    """
    if newest.digest == digest:
        return Verdict.CURRENT
    if newest.digest is None or changed or published_as is None or not newest_held:
        return Verdict.PUBLISH
    return Verdict.YIELD


@dataclass(frozen=True)
class Disagreement:
    """How a planner's jobs differ from the published ones."""

    only_here: list[str] = field(default_factory=list)  # in this file, not published
    only_published: list[str] = field(default_factory=list)
    different: list[str] = field(default_factory=list)  # both, defined differently
    alike: int = 0

    def __bool__(self) -> bool:
        return bool(self.only_here or self.only_published or self.different)

    def summary(self) -> str:
        """``3 jobs alike; only in this file: a; only published: b; different: c``."""
        parts = [f"{self.alike} job{'' if self.alike == 1 else 's'} alike"]
        for label, names in (("only in this file", self.only_here),
                             ("only in the published file", self.only_published),
                             ("defined differently", self.different)):
            if names:
                parts.append(f"{label}: {', '.join(names)}")
        return "; ".join(parts)


def compare(mine: Mapping[str, str], published: Mapping[str, str]) -> Disagreement:
    """Policy lines of this file against the published ones, by job name."""
    different = sorted(n for n in mine.keys() & published.keys() if mine[n] != published[n])
    return Disagreement(
        only_here=sorted(mine.keys() - published.keys()),
        only_published=sorted(published.keys() - mine.keys()),
        different=different,
        alike=len(mine.keys() & published.keys()) - len(different),
    )

