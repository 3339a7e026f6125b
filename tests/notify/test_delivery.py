"""Events told through real channels by a real planner's notifier, from real workers:
each event once, signed; repeats folded; a job paused after failures; retries until an
endpoint answers; a hanging endpoint delays nobody else; a Redis restart loses nothing;
the fleet's own troubles; and what is given up on shows in ``status``."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis

from cronsvc.cli.render import status as render_status
from cronsvc.keys import Keys, all_shards, stable_hash
from cronsvc.malformed import parse
from cronsvc.notify.channels import SIGNATURE_HEADER, sign
from cronsvc.notify.fold import Episodes
from cronsvc.testing import Fleet, WebServer, published
from tests.support.receivers import HttpReceiver, http_receiver
from tests.support.wait import wait_for

pytestmark = pytest.mark.slow

SECRET = "s3cret-for-tests"
FAST = {"retry": "50ms", "retry_max": "200ms", "fold": "1h"}


@pytest.fixture
def hooks() -> Iterator[HttpReceiver]:
    with http_receiver() as receiver:
        yield receiver


@pytest.fixture(autouse=True)
def secret(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOOK_SECRET", SECRET)


def broken(tmp: Path, **options: Any) -> dict[str, Any]:
    """A job that fails until the file ``fixed`` exists."""
    return {"command": ["sh", "-c", f"test -f {tmp}/fixed || {{ echo disk full; exit 3; }}"],
            "notify": ["ops"], **options}


def channels(url: str, **more: Any) -> dict[str, Any]:
    return {"ops": {"webhook": f"{url}/ops", "secret": "${HOOK_SECRET}"}, **more}


def bodies(box: HttpReceiver, path: str = "/ops") -> list[dict[str, Any]]:
    return [json.loads(r.body) for r in box.received if r.path == path]


def events(box: HttpReceiver, path: str = "/ops") -> list[str]:
    return [b["event"] for b in bodies(box, path)]


def run_once(client: Any, job: str) -> None:
    """Trigger ``job`` and wait until its fire has ended (ok, retried or dead)."""
    fid = client.trigger(job)
    wait_for(lambda: client.fire_state(fid) in ("done", "dead", "queued"),
             message=f"{fid} ended")


def test_failure_death_and_recovery_are_told_once_each_and_signed(
        tmp_path: Path, redis_url: str, hooks: HttpReceiver) -> None:
    fleet = Fleet(tmp_path, redis_url, {
        "backup": broken(tmp_path, retries=1, backoff="0.1s",
                         notify_on=["failed", "dead", "recovered"]),
    }, notify=channels(hooks.url), notifier=FAST)
    with fleet.running("w1"):
        client = published(redis_url, fleet.config)
        fid = client.trigger("backup")
        wait_for(lambda: events(hooks) == ["failed", "dead"], message="failed, then dead",
                 timeout=30)
        (tmp_path / "fixed").touch()
        client.trigger("backup")
        wait_for(lambda: events(hooks) == ["failed", "dead", "recovered"],
                 message="recovered", timeout=30)
    failed, dead, recovered = bodies(hooks)
    assert (failed["fire"], failed["attempt"], dead["attempt"]) == (fid, 1, 2)
    assert dead["output"].strip() == "disk full" and dead["error"] == "exit code 3"
    assert recovered["count"] == 1 and recovered["job"] == "backup"
    for r in hooks.received:  # signed with the secret from the environment
        assert r.headers[SIGNATURE_HEADER] == sign(SECRET, r.body)
    assert len({r.headers["X-Cronsvc-Delivery"] for r in hooks.received}) == 3
    assert SECRET not in fleet.logs()


def test_repeats_are_folded_into_one_message_per_window() -> None:
    folds = Episodes({}, window_ms=600_000)
    entry = {"event": "dead", "job": "j", "fire": "j@1", "attempt": 1}
    assert folds.seen(entry, 0) is not None  # the first is told at once
    for n in range(2, 7):
        assert folds.seen({**entry, "fire": f"j@{n}"}, n * 1000) is None
    assert folds.due(599_999) == []
    [summary] = folds.due(600_000)
    assert (summary.count, summary.period_s, summary.entry["fire"]) == (5, 600, "j@6")
    assert folds.due(1_200_000) == []  # nothing new: no message
    # Recovery ends the episode with every failure it saw.
    told = folds.seen({"event": "recovered", "job": "j", "fire": "j@9", "count": 6}, 1_300_000)
    assert told is not None and told.count == 6
    assert folds.seen({"event": "recovered", "job": "j", "fire": "j@10"}, 1_400_000) is None


def test_a_folded_window_is_told_as_one_message(tmp_path: Path, redis_url: str,
                                                hooks: HttpReceiver) -> None:
    fleet = Fleet(tmp_path, redis_url, {"backup": broken(tmp_path)},
                  notify=channels(hooks.url), notifier={**FAST, "fold": "3s"})
    with fleet.running("w1"):
        client = published(redis_url, fleet.config)
        for _ in range(4):
            run_once(client, "backup")
        wait_for(lambda: sum(b["count"] for b in bodies(hooks)) == 4,
                 message="four deaths told", timeout=30)
    told = bodies(hooks)
    assert told[0]["count"] == 1 and len(told) < 4
    folded = [b for b in told if b["count"] > 1]
    assert folded and all(b["id"].endswith(":folded") for b in folded)


def test_a_job_failing_n_fires_in_a_row_is_paused_and_says_so(
        tmp_path: Path, redis_url: str, hooks: HttpReceiver) -> None:
    fleet = Fleet(tmp_path, redis_url, {"backup": broken(tmp_path, pause_after_failures=2)},
                  notify=channels(hooks.url), notifier=FAST)
    with fleet.running("w1"):
        client = published(redis_url, fleet.config)
        run_once(client, "backup")
        assert not client.job("backup").paused
        run_once(client, "backup")
        wait_for(lambda: "paused" in events(hooks), message="paused told", timeout=30)
        [told] = [b for b in bodies(hooks) if b["event"] == "paused"]
        assert told["title"] == "backup: paused after 2 fires failed in a row"
        job = client.job("backup")
        assert job.paused and job.pause_note == "auto: 2 fires failed in a row"
        [entry] = [a for a in client.audit().actions if a.actor == "auto"]
        assert (entry.action, entry.target, entry.note) == ("pause", "backup", job.pause_note)
        assert client.resume("backup").was_paused
        (tmp_path / "fixed").touch()
        run_once(client, "backup")
        wait_for(lambda: "recovered" in events(hooks), message="recovered", timeout=30)


def test_an_endpoint_failing_five_times_gets_the_message_once(
        tmp_path: Path, redis_url: str, hooks: HttpReceiver) -> None:
    hooks.statuses = [500] * 5
    fleet = Fleet(tmp_path, redis_url, {"backup": broken(tmp_path)},
                  notify=channels(hooks.url), notifier=FAST)
    with fleet.running("w1"):
        run_once(published(redis_url, fleet.config), "backup")
        wait_for(lambda: len(hooks.received) == 6, message="five 500s, then a 200",
                 timeout=30)
        home = Keys()
        r = redis.Redis.from_url(redis_url)
        wait_for(lambda: r.zcard(home.notify_sent) == 1, message="recorded as sent")
    assert len({r.headers["X-Cronsvc-Delivery"] for r in hooks.received}) == 1
    assert events(hooks) == ["dead"] * 6


def test_a_hanging_endpoint_delays_no_other_channel(tmp_path: Path, redis_url: str,
                                                    hooks: HttpReceiver) -> None:
    with http_receiver() as slow:
        slow.hang = threading.Event()
        fleet = Fleet(tmp_path, redis_url,
                      {f"backup-{n}": {**broken(tmp_path), "notify": ["slow", "ops"]}
                       for n in range(3)},
                      notify=channels(hooks.url, slow={"webhook": f"{slow.url}/slow",
                                                       "timeout": "30s"}),
                      notifier=FAST)
        with fleet.running("w1"):
            client = published(redis_url, fleet.config)
            for n in range(3):  # three jobs: nothing folded
                run_once(client, f"backup-{n}")
            wait_for(lambda: len(events(hooks)) == 3,
                     message="all three told to ops while slow hangs", timeout=30)
            assert slow.received == []
            slow.hang.set()
            wait_for(lambda: len(slow.received) == 3, message="slow catches up", timeout=60)


def test_nothing_is_lost_when_redis_restarts_with_messages_waiting(
        tmp_path: Path, fresh_server: Any, hooks: HttpReceiver) -> None:
    server = fresh_server(appendfsync="always")
    hooks.statuses = [500] * 1000  # nothing gets through yet
    fleet = Fleet(tmp_path, server.url, {"backup": broken(tmp_path), "export": broken(tmp_path)},
                  notify=channels(hooks.url), notifier=FAST)
    r = redis.Redis.from_url(server.url)
    with fleet.running("w1"):
        client = published(server.url, fleet.config)
        run_once(client, "backup")
        run_once(client, "export")
        wait_for(lambda: r.hlen(Keys().notify_deliveries) == 2 and r.llen(Keys().outbox) == 0,
                 message="two messages waiting", timeout=30)
        server.stop()
        server.start()
        hooks.statuses.clear()
        wait_for(lambda: len({x.headers["X-Cronsvc-Delivery"] for x in hooks.received
                              if x.path == "/ops"}) == 2
                 and r.hlen(Keys().notify_deliveries) == 0,
                 message="both delivered after the restart", timeout=60)
    accepted = [x for x in hooks.received if x.headers.get("X-Cronsvc-Delivery")]
    assert len({x.headers["X-Cronsvc-Delivery"] for x in accepted}) == 2


def test_fleet_troubles_are_told_when_they_begin_and_end(tmp_path: Path, redis_url: str,
                                                         hooks: HttpReceiver) -> None:
    fleet = Fleet(tmp_path, redis_url, {"backup": broken(tmp_path)},
                  notify=channels(hooks.url),
                  notifier={**FAST, "fleet": ["ops"], "fleet_after": "0.1s",
                            "queue_late": "1s"})
    fleet.start("notifier", "notifier")
    try:
        wait_for(lambda: {"no_worker", "no_planner"} <= set(events(hooks)),
                 message="no worker, no planner", timeout=30)
        fleet.planner()
        fleet.worker("w1")
        wait_for(lambda: events(hooks).count("recovered") >= 2,
                 message="workers and planners back", timeout=30)
    finally:
        fleet.stop_all()
    ended = {b["status"] for b in bodies(hooks) if b["event"] == "recovered"}
    assert {"no_worker", "no_planner"} <= ended
    assert all(b["job"] is None for b in bodies(hooks))


def test_a_message_given_up_on_shows_in_status(tmp_path: Path, redis_url: str,
                                               hooks: HttpReceiver) -> None:
    hooks.statuses = [500] * 1000
    fleet = Fleet(tmp_path, redis_url, {"backup": broken(tmp_path)},
                  notify=channels(hooks.url), notifier={**FAST, "give_up": "0.5s"})
    with fleet.running("w1"):
        client = published(redis_url, fleet.config)
        run_once(client, "backup")
        wait_for(lambda: client.status().notifications["undelivered"],
                 message="given up on", timeout=30)
    status = client.status()
    [gone] = status.notifications["undelivered"]
    assert gone["channel"] == "ops" and gone["event"] == "dead" and "500" in gone["error"]
    assert any("given up on" in w for w in status.warnings)
    shown = render_status(status)
    assert "1 given up on" in shown and "answered 500" in shown
    with WebServer(tmp_path, redis_url, fleet.config) as web:
        api = httpx.get(f"{web.url}/api/v1/status").json()
        assert api["notifications"]["undelivered"][0]["channel"] == "ops"
        page = httpx.get(f"{web.url}/").text
        assert "given up on" in page and "answered 500" in page


def test_on_shards_every_outbox_is_drained_and_an_auto_pause_reaches_every_shard(
        tmp_path: Path, redis_url: str, hooks: HttpReceiver) -> None:
    names = [f"job-{n}" for n in range(6)]
    shards = {stable_hash(n) % 3 for n in names}
    assert len(shards) > 1  # the jobs' fires and outboxes are on several shards
    fleet = Fleet(tmp_path, redis_url,
                  {n: broken(tmp_path, pause_after_failures=1) for n in names},
                  notify=channels(hooks.url), notifier=FAST, redis={"shards": 3})
    with fleet.running("w1"):
        client = published(redis_url, fleet.config)
        for n in names:
            run_once(client, n)
        wait_for(lambda: sorted(b["job"] for b in bodies(hooks) if b["event"] == "paused")
                 == names, message="every job paused and told", timeout=30)
        r = redis.Redis.from_url(redis_url)
        wait_for(lambda: all(r.hexists(k.paused, n) for k in all_shards(3) for n in names),
                 message="each pause on every shard")
    assert sorted(b["job"] for b in bodies(hooks) if b["event"] == "dead") == names
    assert all(r.llen(k.outbox) == 0 for k in all_shards(3))


def test_outbox_entries_that_are_no_event_are_set_aside_and_the_others_told(
        tmp_path: Path, redis_url: str, hooks: HttpReceiver) -> None:
    """Written by hand, before a real event: once they stopped every pass of the notifier
    (an ``at`` that is no number), and nothing was told again."""
    k = Keys()
    r = redis.Redis.from_url(redis_url, decode_responses=True)
    garbage = ["garbage", "[1]", '{"event": 5}', '{"event": "dead", "job": "backup", "at": "x"}',
               '{"event": "dead", "job": "backup", "fire": "backup@x"}']
    r.lpush(k.outbox, *garbage)  # the oldest: routed first
    fleet = Fleet(tmp_path, redis_url, {"backup": broken(tmp_path, notify_on=["dead"])},
                  notify=channels(hooks.url), notifier=FAST)
    with fleet.running("w1"):
        client = published(redis_url, fleet.config)
        run_once(client, "backup")
        wait_for(lambda: events(hooks) == ["dead"], message="the dead event told",
                 timeout=30)
        assert fleet.procs["planner"].poll() is None, fleet.logs()
    aside = [parse(x) for x in r.lrange(k.malformed, 0, -1)]
    assert sorted(e.member for e in aside) == sorted(garbage), aside
    assert {e.key for e in aside} == {k.outbox} and r.llen(k.outbox) == 0
    assert [e.why for e in reversed(aside)] == [
        "not JSON", "a JSON list, not an object", "no event", 'its at is "x", not a whole number',
        "its fire is not a fire id"]
    assert fleet.log("planner").count("set aside") == len(garbage), fleet.logs()
    assert "Traceback" not in fleet.log("planner")
