"""The audit log: every change made through the Client (so the CLI, the API and the
pages) is written with who made it, when and the note; `cronsvc audit` shows it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import redis
import yaml
from click.testing import CliRunner

from cronsvc.audit import AUDIT_CAP
from cronsvc.cli.main import main
from cronsvc.client.audit import default_actor
from cronsvc.client.client import Client
from cronsvc.errors import BadArgument
from cronsvc.keys import Keys
from cronsvc.testing import published
from tests.support.cli import ok


@pytest.fixture
def config(tmp_path: Path) -> Path:
    path = tmp_path / "schedules.yaml"
    path.write_text(yaml.safe_dump({"jobs": {
        "nightly": {"cron": "0 3 * * *", "command": ["true"]},
        "digest": {"command": ["true"]}}}))
    return path


@pytest.fixture
def client(config: Path, redis_url: str) -> Client:
    return published(redis_url, config)


def test_each_change_is_written_with_its_actor_and_note(client: Client) -> None:
    client.pause("nightly", "db upgrade")
    client.resume("nightly", note="done")
    fid = client.trigger("nightly", note="by hand")
    ops = client.acting_as("web:alice")
    ops.upsert_schedule("digest:user-1", job="digest", every="1h")
    ops.upsert_schedule("digest:user-1", job="digest", every="1h")  # unchanged: no entry
    ops.delete_schedule("digest:user-1")
    assert client.actor == default_actor()  # acting_as leaves the original as it was
    entries = [(a.actor, a.action, a.target, a.note) for a in client.audit(limit=10).actions]
    me = default_actor()
    assert entries == [
        ("web:alice", "schedule-delete", "digest:user-1", None),
        ("web:alice", "schedule-set", "digest:user-1", None),
        (me, "trigger", "nightly", "by hand"),
        (me, "resume", "nightly", "done"),
        (me, "pause", "nightly", "db upgrade"),
    ]
    assert client.audit(limit=10).actions[2].detail == {"fire": fid}
    assert me.startswith("client:")


def test_pages_of_the_log_and_its_cap(client: Client, r: redis.Redis) -> None:
    for i in range(5):
        client.pause("nightly", f"n{i}")
    first = client.audit(limit=2)
    second = client.audit(limit=2, cursor=first.cursor)
    last = client.audit(limit=2, cursor=second.cursor)
    assert [a.note for a in first.actions + second.actions + last.actions] == [
        "n4", "n3", "n2", "n1", "n0"]
    assert last.cursor is None
    r.rpush(Keys().audit, *["{}"] * AUDIT_CAP)
    client.pause("nightly", "one more")
    assert r.llen(Keys().audit) == AUDIT_CAP


def test_a_page_past_the_log_is_a_bad_argument_not_a_redis_error(client: Client) -> None:
    with pytest.raises(BadArgument, match=r"^cursor 10{30}: not one a page gave \(0 to "
                                          r"10000\)$"):
        client.audit(cursor=10**30)
    with pytest.raises(BadArgument, match=r"^limit 10{30}: 1 to 10000$"):
        client.audit(limit=10**30)
    client.pause("nightly")
    assert client.audit(cursor=AUDIT_CAP).actions == []


def test_cronsvc_audit_shows_the_cli_s_own_changes(config: Path, redis_url: str,
                                                   client: Client) -> None:
    runner = CliRunner()
    args = ["--config", str(config), "--redis-url", redis_url]
    ok(runner.invoke(main, ["pause", "nightly", "--note", "maintenance", *args]))
    out = ok(runner.invoke(main, ["audit", *args]))
    assert "pause" in out and "nightly" in out and "maintenance" in out and "cli:" in out
    (entry,) = json.loads(ok(runner.invoke(main, ["audit", "--json", "-n", "1", *args])))
    assert (entry["action"], entry["target"], entry["note"]) == ("pause", "nightly",
                                                                 "maintenance")
