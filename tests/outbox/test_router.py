"""The outbox router on a real Redis with two shards, its consumers as the notifier names
them: one pass hands a chain to the chains, a pause to the auto-pause and the notifications,
a failure to the notifications, sets aside an entry that is no event, and leaves every
outbox empty."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import redis
import yaml

from cronsvc import audit
from cronsvc.clock import redis_ms
from cronsvc.config.models import Config, load_config
from cronsvc.fires import chain_fire, fire_id
from cronsvc.keys import Keys, all_shards, keys_for
from cronsvc.malformed import parse
from cronsvc.notify.messages import Messages
from cronsvc.outbox.autopause import AutoPause
from cronsvc.outbox.chains import Chains
from cronsvc.outbox.router import Router
from cronsvc.store.scripts import Scripts
from cronsvc.testing import published

SENDER = "router-test"
T0 = 1_795_572_000_000
NOTE = "auto: 3 fires failed in a row"


def job_file(tmp_path: Path) -> Config:
    """Three jobs, published on both shards: export chains import, cleanup tells ops."""
    path = tmp_path / "schedules.yaml"
    path.write_text(yaml.safe_dump({
        "redis": {"shards": 2},
        "notify": {"ops": {"webhook": "http://127.0.0.1:9/ops"}},  # routed, never sent
        "jobs": {
            "export": {"command": ["true"], "on_success": ["import"]},
            "import": {"command": ["true"]},
            "cleanup": {"command": ["false"], "notify": ["ops"], "notify_on": ["failed"],
                       "pause_after_failures": 3},
        },
    }))
    return load_config(path)


def push(r: redis.Redis, shard: Keys, *entries: dict[str, Any] | str) -> None:
    """Entries onto ``shard``'s outbox, oldest first, as the scripts push them."""
    for entry in entries:
        r.lpush(shard.outbox, entry if isinstance(entry, str) else json.dumps(entry))


def test_one_pass_hands_each_entry_to_its_consumers_and_empties_the_outboxes(
        tmp_path: Path, redis_url: str, r: redis.Redis) -> None:
    config = job_file(tmp_path)
    published(redis_url, tmp_path / "schedules.yaml")
    shards = all_shards(2)
    home = shards[0]
    cleanup_shard = keys_for("cleanup", 2)
    # Each shard has entries; those of the one that is not home leave it after the route
    # script's call, the home shard's in it.
    assert keys_for("export", 2) == home and cleanup_shard != home
    upstream = fire_id("export", T0)
    failed = fire_id("cleanup", T0)
    push(r, home, {"event": "chain", "job": "export", "fire": upstream, "attempt": 1,
                   "at": T0 + 5000, "status": "ok", "output": "42 rows", "next": "import"})
    push(r, cleanup_shard,
         {"event": "failed", "job": "cleanup", "fire": failed, "attempt": 1, "at": T0,
          "status": "failed", "exit_code": 1},
         {"event": "paused", "job": "cleanup", "fire": failed, "at": T0, "reason": NOTE,
          "count": 3})
    push(r, home, '{"event": 5}')
    scripts = Scripts(r)
    assert scripts.notify_lease(home, SENDER, 10_000)
    messages = Messages(r, scripts, lambda: config, SENDER, threading.Event())
    router = Router(r, lambda: shards, [messages, Chains(r, scripts, lambda: config),
                                        AutoPause(r, scripts, lambda: config)],
                    closer=messages)

    router.route(redis_ms(r))

    # The chains: import queued once, at the end of the upstream run, naming it.
    queued = chain_fire("import", upstream, T0 + 5000)
    downstream = keys_for("import", 2)
    assert r.zscore(downstream.queue, queued) == T0 + 5000
    assert json.loads(r.hget(downstream.payloads, queued))["upstream"] == {
        "job": "export", "fire": upstream, "status": "ok", "attempt": 1, "output": "42 rows"}
    # The auto-pause: paused on the other shard (the script pauses it on its own), audited.
    assert json.loads(r.hget(home.paused, "cleanup"))["note"] == NOTE
    assert not r.hexists(cleanup_shard.paused, "cleanup")
    [action] = [audit.parse(x) for x in r.lrange(home.audit, 0, -1)]
    assert (action.actor, action.action, action.target, action.note) == (
        "auto", "pause", "cleanup", NOTE)
    # The notifications: the failure and the pause told to ops; the chain told to no one.
    assert sorted(r.hkeys(home.notify_deliveries)) == [
        f"failed:{failed}:1/ops", f"paused:{failed}:3/ops"]
    # The entry that is no event set aside, and every outbox empty.
    [aside] = [parse(x) for x in r.lrange(home.malformed, 0, -1)]
    assert (aside.key, aside.member, aside.why) == (home.outbox, '{"event": 5}', "no event")
    assert [r.llen(k.outbox) for k in shards] == [0, 0]
