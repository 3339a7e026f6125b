"""The Python API of a running fleet: what the CLI wraps and applications call.

    from cronsvc import Client
    c = Client("redis://localhost:6379/0")
    fid = c.trigger("nightly-report")
    c.pause("nightly-report", note="migration until 14:00")

A client needs only the Redis URL. Give it the job file too (``config=``) when
the fleet uses shards or a key prefix, so it finds the same keys.
"""

from __future__ import annotations

import difflib
import json
from typing import Any

import redis

from .config import Config, load_config
from .connection import connect
from .errors import UnknownJob
from .fires import fire_id, new_tag
from .keys import Keys, keys_for
from .scripts import Scripts


class Client:
    """Operations on the fleet that uses one Redis (or one set of shards)."""

    def __init__(
        self,
        url: str | None = None,
        *,
        config: str | Config | None = None,
        client: redis.Redis | None = None,
    ) -> None:
        if isinstance(config, str):
            config = load_config(config)
        self.config = config
        self.shards = config.redis.shards if config else 1
        self.prefix = config.redis.prefix if config else ""
        if client is None:
            if url is None:
                url = config.redis.url if config else None
            if not url:
                raise ValueError("Client needs a Redis URL (or a config with redis.url)")
            client = connect(url)
        self.redis = client
        self.scripts = Scripts(client, prefix=self.prefix)

    def keys(self, job: str) -> Keys:
        return keys_for(job, self.shards, self.prefix)

    def _s(self, value: Any) -> str:
        return value.decode() if isinstance(value, bytes) else str(value)

    def server_ms(self) -> int:
        """The Redis server clock, the only clock the fleet goes by."""
        sec, usec = self.redis.time()
        return int(sec) * 1000 + int(usec) // 1000

    # -- jobs ------------------------------------------------------------------
    def published_jobs(self) -> list[str]:
        """Names of the jobs the planners have published."""
        from .keys import all_shards

        names: list[str] = []
        for keys in all_shards(self.shards, self.prefix):
            names += [self._s(k) for k in self.redis.hkeys(keys.jobs)]
        return sorted(names)

    def require_job(self, job: str) -> Keys:
        """The keys of a published job; UnknownJob naming close matches if there is none."""
        keys = self.keys(job)
        if self.redis.hexists(keys.jobs, job):
            return keys
        known = self.published_jobs()
        close = difflib.get_close_matches(job, known, n=3)
        hint = f"; did you mean {', '.join(close)}?" if close else (
            "" if known else "; no job is published (is a planner running?)")
        raise UnknownJob(f"unknown job {job!r}{hint}")

    def publish_config(self) -> None:
        """Publish the client's job file now, as a planner does when it starts."""
        if self.config is None:
            raise ValueError("publish_config needs the client's config")
        from .planner import Planner

        Planner(self.config.source, self.redis).sync()

    # -- one-off runs ----------------------------------------------------------
    def enqueue(self, job: str, due_ms: int, payload: Any = None, *, kind: str = "at") -> str:
        """Run ``job`` once at ``due_ms`` (server clock, ms) with ``payload``; its fire id."""
        keys = self.require_job(job)
        fid = fire_id(job, due_ms, new_tag(kind))
        self.scripts.enqueue(keys, fid, due_ms, payload)
        if due_ms <= self.server_ms() + 1000:
            self.redis.publish(keys.wakeup, "enqueue")
        return fid

    def trigger(self, job: str, payload: Any = None) -> str:
        """Run ``job`` once now, beside its schedule; the new fire's id."""
        return self.enqueue(job, self.server_ms(), payload, kind="trigger")

    def cancel(self, fid: str) -> bool:
        """Unqueue a fire not started yet; False if it is not queued (running or done)."""
        from .fires import parse_fire

        job, _, _ = parse_fire(fid)
        return self.scripts.cancel(self.keys(job), fid)

    # -- pause -----------------------------------------------------------------
    def pause(self, job: str, note: str | None = None) -> None:
        """Stop new fires of ``job`` everywhere; they are recorded as skipped (paused)."""
        keys = self.require_job(job)
        value = json.dumps({"note": note or "", "since": self.server_ms()})
        self.redis.hset(keys.paused, job, value)

    def resume(self, job: str) -> bool:
        """Let ``job`` fire again from now; False if it was not paused at run time."""
        keys = self.require_job(job)
        return bool(self.redis.hdel(keys.paused, job))
