"""cronsvc.Client against a real Redis: what it lists, and what pause, resume, one-offs
and dead-fire handling change (scripts driven by hand, or a real worker in a thread)."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import redis
import yaml

from cronsvc.client.client import Client
from cronsvc.config.models import load_config
from cronsvc.errors import BadArgument, BadTime, CronsvcError, StillRunning, UnknownFire, UnknownJob
from cronsvc.fires import fire_id, parse_fire
from cronsvc.keys import Keys
from cronsvc.planner.planner import Planner
from cronsvc.schedule.expand import Spec, occurrences_ms
from cronsvc.schedule.runtime import MAX_PAYLOAD_BYTES
from cronsvc.store.connection import connect
from cronsvc.store.scripts import Scripts
from cronsvc.testing import read_ledger
from cronsvc.worker.worker import Worker
from tests.support.wait import wait_for

K = Keys()
MIN = 60_000


def write_jobs(path: Path, jobs: dict[str, Any]) -> Path:
    path.write_text(yaml.safe_dump({"jobs": jobs}))
    return path


def job(cron: str, **options: Any) -> dict[str, Any]:
    return {"cron": cron, "command": ["true"], **options}


JOBS = {
    "nightly": job("30 2 * * *", timezone="Europe/Berlin"),
    "minutely": job("* * * * *", catch_up="all"),
    "latest": job("* * * * *", catch_up="latest"),
    "never-late": job("* * * * *", catch_up="none"),
    "strict": job("0 0 1 1 *", starting_deadline="1s", retries=2),
    "frozen": job("0 0 1 1 *", paused=True),
}


@pytest.fixture
def make_client(redis_url: str, tmp_path: Path) -> Callable[..., Client]:
    def make(jobs: dict[str, Any] = JOBS) -> Client:
        c = Client(redis_url, config=str(write_jobs(tmp_path / "schedules.yaml", jobs)))
        c.publish_config()
        return c

    return make


@pytest.fixture
def client(make_client: Callable[..., Client]) -> Client:
    return make_client()


def server_ms(r: redis.Redis) -> int:
    sec, usec = r.time()
    return int(sec) * 1000 + int(usec) // 1000


# -- what it lists -----------------------------------------------------------------------
def test_jobs_are_the_published_ones_with_schedule_in_words_and_next_fire(
        client: Client, r: redis.Redis) -> None:
    before = server_ms(r)
    jobs = {j.name: j for j in client.jobs()}
    assert sorted(jobs) == sorted(JOBS)
    nightly = jobs["nightly"]
    assert (nightly.cron, nightly.description, nightly.timezone) == (
        "30 2 * * *", "at 02:30 every day", "Europe/Berlin")
    spec = Spec("30 2 * * *", "Europe/Berlin", "nightly")
    assert nightly.next_fire_ms == occurrences_ms(spec, before, before + 2 * 86_400_000)[0]
    assert (nightly.paused, nightly.last_run) == (False, None)
    assert (jobs["frozen"].paused, jobs["frozen"].paused_in_file) == (True, True)
    assert client.job("nightly") == nightly
    assert client.next_fires("nightly", 3, after_ms=before) == occurrences_ms(
        spec, before, before + 4 * 86_400_000)[:3]


def test_last_run_is_the_newest_run_and_skips_do_not_hide_it(client: Client) -> None:
    s = Scripts(client.redis)
    ran = {"fire": "nightly@1", "status": "ok", "scheduled": 1, "started": 5, "duration_ms": 9}
    s.record(K, "nightly", ran)
    s.record(K, "nightly", {"fire": "nightly@2", "status": "skipped", "reason": "paused",
                            "scheduled": 2, "started": None})
    assert client.job("nightly").last_run == ran
    assert client.history("nightly", 1)[0]["reason"] == "paused"
    assert [h["fire"] for h in client.history("nightly")] == ["nightly@2", "nightly@1"]


@pytest.mark.parametrize("call, name, close", [
    (Client.history, "nigthly", "nightly"), (Client.pause, "minutley", "minutely"),
    (Client.trigger, "nightlyy", "nightly"), (Client.next_fires, "strikt", "strict"),
])
def test_an_unknown_job_is_an_error_naming_close_ones(
        client: Client, call: Callable[[Client, str], object], name: str, close: str) -> None:
    with pytest.raises(UnknownJob, match=f"unknown job '{name}'; did you mean {close}"):
        call(client, name)


def test_queue_shows_due_ahead_and_in_flight_with_lateness(client: Client,
                                                           r: redis.Redis) -> None:
    now = server_ms(r)
    old, recent = fire_id("minutely", now - 5 * MIN), fire_id("minutely", now - MIN)
    ahead = [fire_id("nightly", now + n * MIN) for n in (1, 2, 3)]
    r.zadd(K.queue, {old: now - 5 * MIN, recent: now - MIN, **{f: parse_fire(f)[1]
                                                               for f in ahead}})
    r.hset(K.attempts, recent, 1)  # a retry waiting
    (held,) = Scripts(r).claim(K, "w1", lease_ms=30_000).claimed
    assert held.fire_id == old
    view = client.queue(limit=2)
    assert (view.due_count, view.ahead_count) == (1, 3)
    assert [(q.fire, q.kind, q.attempts) for q in view.due] == [(recent, "cron", 1)]
    assert [q.fire for q in view.ahead] == ahead[:2]
    assert view.oldest_due_ms == now - MIN and view.lateness_ms >= MIN
    (flight,) = view.in_flight
    assert (flight.fire, flight.worker, flight.attempt) == (old, "w1", 1)
    assert flight.lease_until_ms > view.now_ms


def test_status_lists_planners_and_workers_and_warns_about_eviction(
        client: Client, r: redis.Redis) -> None:
    Planner(client.config.source, client.redis, planner_id="p1").tick()  # type: ignore[union-attr]
    now = server_ms(r)
    r.zadd(K.workers, {"w-live": now, "w-gone": now - 120_000})
    r.hset(K.worker_info, "w-live", json.dumps({"busy": 1, "slots": 4, "pid": 7}))
    found = client.status()
    assert [(p.id, p.alive, p.info["jobs"]) for p in found.planners] == [("p1", True, 6)]
    assert {w.id: w.alive for w in found.workers} == {"w-live": True, "w-gone": False}
    assert found.redis_version and found.aof is not None
    assert found.maxmemory_policy == "noeviction" and found.warnings == []
    old = r.config_get("maxmemory-policy")["maxmemory-policy"]
    r.config_set("maxmemory-policy", "allkeys-lru")
    try:
        assert any("maxmemory-policy is allkeys-lru" in w for w in client.status().warnings)
    finally:
        r.config_set("maxmemory-policy", old)
    r.delete(K.planners, K.workers)
    assert {"no live planner: no new fires are being planned",
            "no live worker: due fires are not being run"} <= set(client.status().warnings)


def test_a_sharded_fleet_is_read_across_its_shards(redis_url: str, tmp_path: Path,
                                                  r: redis.Redis) -> None:
    path = tmp_path / "sharded.yaml"
    path.write_text(yaml.safe_dump({"redis": {"shards": 3, "prefix": "x:"}, "jobs": JOBS}))
    c = Client(redis_url, config=str(path))
    c.publish_config()
    assert len({c.keys(name) for name in JOBS}) > 1  # the jobs do spread
    assert sorted(j.name for j in c.jobs()) == sorted(JOBS)
    fids = [c.enqueue(name, timedelta(hours=1)) for name in JOBS]
    assert sorted(q.fire for q in c.queue(limit=10).ahead) == sorted(fids)
    c.pause("nightly")
    assert r.hexists(c.keys("nightly").paused, "nightly") and not r.exists(K.paused)
    assert [j.name for j in c.jobs() if j.paused] == ["frozen", "nightly"]


# -- one-off runs ------------------------------------------------------------------------
def test_enqueue_at_a_time_with_payload_then_cancel(client: Client, r: redis.Redis) -> None:
    fid = client.enqueue("nightly", timedelta(minutes=10), {"rows": [1, 2]})
    name, due, tag = parse_fire(fid)
    assert (name, tag[0]) == ("nightly", "a")  # type: ignore[index]
    assert r.zscore(K.queue, fid) == due and due > server_ms(r) + 9 * MIN
    assert json.loads(r.hget(K.payloads, fid)) == {"rows": [1, 2]}
    assert [(q.fire, q.kind) for q in client.queue().ahead] == [(fid, "at")]
    at = datetime(datetime.now(UTC).year + 2, 1, 1, 9, tzinfo=UTC)  # at most 10 years ahead
    assert parse_fire(client.enqueue("nightly", at))[1] == int(at.timestamp() * 1000)
    assert client.fire_state(fid) == "queued"
    assert client.cancel(fid) is True
    assert (client.cancel(fid), client.fire_state(fid)) == (False, "unknown")
    assert r.hget(K.payloads, fid) is None


def test_an_enqueue_due_before_an_idle_worker_would_wake_wakes_the_workers(
        client: Client, r: redis.Redis) -> None:
    """An idle worker sleeps up to 5 s (``MAX_SLEEP_S``): a one-off due within that, not only
    within the next second, is told to the workers, as the planner tells its fires."""
    sub = r.pubsub(ignore_subscribe_messages=True)
    sub.subscribe(K.wakeup)
    try:
        wait_for(lambda: r.pubsub_numsub(K.wakeup)[0][1] == 1, message="subscribed")
        client.enqueue("nightly", timedelta(seconds=3))
        got: list[Any] = []
        wait_for(lambda: got.append(sub.get_message(timeout=0.1)) or any(got),
                 message="the wake-up of an enqueue due in 3 s")
        assert [m["data"] for m in got if m] == ["enqueue"]
    finally:
        sub.close()


def test_a_one_off_keeps_to_the_payload_cap_and_to_times_ahead(client: Client,
                                                                r: redis.Redis) -> None:
    big = "x" * MAX_PAYLOAD_BYTES  # two bytes more as JSON: its quotes
    for one_off in (lambda: client.trigger("nightly", big),
                    lambda: client.enqueue("nightly", timedelta(hours=1), big)):
        with pytest.raises(BadArgument, match=r"^nightly: payload: 65,538 bytes as JSON; at "
                                              r"most 65,536$"):
            one_off()
    for past in (timedelta(minutes=-5), datetime(2020, 1, 1, tzinfo=UTC),
                 server_ms(r) - MIN):
        with pytest.raises(BadTime, match=r"^nightly: due time \d+ ms is in the past$"):
            client.enqueue("nightly", past)
    assert r.zcard(K.queue) == 0
    fid = client.trigger("nightly", "x" * (MAX_PAYLOAD_BYTES - 2))  # just fits
    assert len(r.hget(K.payloads, fid)) == MAX_PAYLOAD_BYTES  # type: ignore[arg-type]


# -- pause and resume ----------------------------------------------------------------------
def test_pause_drops_cron_fires_claimed_after_it_not_one_offs(client: Client,
                                                              r: redis.Redis) -> None:
    now = server_ms(r)
    before = fire_id("minutely", now - 2 * MIN)
    r.zadd(K.queue, {before: now - 2 * MIN})
    (held,) = Scripts(r).claim(K, "w1").claimed  # claimed before the pause
    cron = fire_id("minutely", now - MIN)
    r.zadd(K.queue, {cron: now - MIN})
    paused = client.pause("minutely", note="db migration")
    assert [(f.fire, f.worker) for f in paused.in_flight] == [(held.fire_id, "w1")]
    assert paused.since_ms >= now
    trig = client.trigger("minutely", {"why": "by hand"})
    res = Scripts(r).claim(K, "w2", batch=5)
    assert res.dropped == [(cron, "paused")]
    assert [(c.fire_id, c.payload) for c in res.claimed] == [(trig, {"why": "by hand"})]
    info = client.job("minutely")
    assert (info.paused, info.pause_note, info.paused_since_ms) == (
        True, "db migration", paused.since_ms)
    again = client.pause("minutely", note="longer")
    assert again.since_ms == paused.since_ms  # still the same pause
    assert client.job("minutely").pause_note == "longer"
    assert client.resume("minutely") and not client.resume("minutely")
    assert not client.job("minutely").paused


def test_pause_wait_gives_up_while_a_claimed_run_holds_on(client: Client,
                                                          r: redis.Redis) -> None:
    r.zadd(K.queue, {fire_id("minutely", server_ms(r) - MIN): 0})
    (held,) = Scripts(r).claim(K, "w1").claimed
    with pytest.raises(StillRunning, match=held.fire_id):
        client.pause("minutely", wait=0.1)
    assert client.job("minutely").paused  # paused all the same


def pause_since(client: Client, job: str, since: int) -> str:
    """A pause that began at ``since``, as the pause script writes it."""
    client.pause(job)
    value = json.dumps({"note": "", "since": since})
    client.redis.hset(K.paused, job, value)
    return value


@pytest.mark.parametrize("name, policy", [("minutely", "all"), ("latest", "latest"),
                                          ("never-late", "none")])
def test_resume_catch_up_queues_the_missed_fires_as_the_policy_says(
        client: Client, r: redis.Redis, name: str, policy: str) -> None:
    since = server_ms(r) - 5 * MIN - 30_000
    pause_since(client, name, since)
    spec = Spec("* * * * *", name=name)
    low = [fire_id(name, d) for d in occurrences_ms(spec, since, server_ms(r))]
    done = client.resume(name, catch_up=True)
    high = [fire_id(name, d) for d in occurrences_ms(spec, since, server_ms(r))]
    assert done and done.catch_up == policy and not done.truncated
    if policy == "all":
        assert low == done.requeued[:len(low)] and set(done.requeued) <= set(high)
    elif policy == "latest":
        assert done.requeued in ([low[-1]], [high[-1]])
    else:
        assert done.requeued == []
    for fid in done.requeued:  # original fire ids, queued at their due time
        assert r.zscore(K.queue, fid) == parse_fire(fid)[1]
    assert not client.job(name).paused


def test_resume_catch_up_leaves_fires_that_are_queued_running_or_dead(
        client: Client, r: redis.Redis) -> None:
    now = server_ms(r)
    pause_since(client, "minutely", now - 3 * MIN - 30_000)
    dues = occurrences_ms(Spec("* * * * *", name="minutely"), now - 3 * MIN - 30_000, now)
    running, dead, queued = (fire_id("minutely", d) for d in dues[:3])
    r.zadd(K.working, {running: now + MIN})
    r.zadd(K.dead, {dead: now})
    r.zadd(K.queue, {queued: 1})
    done = client.resume("minutely", catch_up=True)
    assert not {running, dead, queued} & set(done.requeued)
    assert r.zscore(K.queue, queued) == 1 and r.zscore(K.working, running)


def test_resume_without_catch_up_queues_nothing(client: Client, r: redis.Redis) -> None:
    pause_since(client, "minutely", server_ms(r) - 5 * MIN)
    assert client.resume("minutely").requeued == []
    assert r.zcard(K.queue) == 0


def test_resume_says_when_the_job_file_keeps_it_paused(client: Client) -> None:
    done = client.resume("frozen")
    assert (bool(done), done.paused_in_file) == (False, True)


# -- dead fires ----------------------------------------------------------------------------
def kill(client: Client, r: redis.Redis, name: str, due: int, payload: Any = None) -> str:
    """A one-off of ``name`` due at ``due`` that failed its only attempt (dead)."""
    s = Scripts(r)
    fid = fire_id(name, due, "aabcdef")
    s.enqueue(K, fid, due, payload)
    (c,) = s.claim(K, "w1", now_ms=due).claimed  # on time: no starting deadline missed
    record = {"fire": fid, "job": name, "status": "failed", "reason": "boom",
              "scheduled": due, "started": due, "attempt": c.token}
    assert s.fail(K, fid, c.token, name, record, 100, 1, 0, now_ms=due).verdict == "dead"
    return fid


def test_dead_list_retry_with_fresh_attempts_and_purge(client: Client, r: redis.Redis) -> None:
    hour_ago = server_ms(r) - 3_600_000
    fid = kill(client, r, "strict", hour_ago, {"n": 1})
    (d,) = client.dead()
    assert (d.fire, d.job, d.kind, d.due_ms, d.attempts, d.payload) == (
        fid, "strict", "at", hour_ago, 1, {"n": 1})
    assert d.last is not None and d.last["status"] == "dead"
    assert client.dead("nightly") == []
    client.dead_retry(fid)
    assert client.dead() == [] and client.fire_state(fid) == "queued"
    # An hour late against a 1 s starting deadline, yet claimed: a retry is not a first start.
    (again,) = Scripts(r).claim(K, "w2").claimed
    assert (again.fire_id, again.token, again.payload) == (fid, 1, {"n": 1})
    with pytest.raises(UnknownFire, match="is not dead"):
        client.dead_retry(fid)
    assert client.fire_state(fid) == "running"


def test_dead_retry_refuses_a_paused_jobs_cron_fire_and_removed_jobs(
        client: Client, make_client: Callable[..., Client], r: redis.Redis) -> None:
    cron = fire_id("minutely", 1000)
    r.zadd(K.dead, {cron: 5})
    client.pause("minutely")
    with pytest.raises(CronsvcError, match="minutely is paused"):
        client.dead_retry(cron)
    gone = fire_id("nightly", 1000)
    r.zadd(K.dead, {gone: 5})
    make_client({"minutely": JOBS["minutely"]})  # nightly removed from the file
    with pytest.raises(UnknownJob, match="removed job"):
        client.dead_retry(gone)


def test_dead_purge_of_one_job_then_all(client: Client, r: redis.Redis) -> None:
    now = server_ms(r)
    mine = kill(client, r, "strict", now, {"big": "payload"})
    other = fire_id("nightly", 1000)
    r.zadd(K.dead, {other: 5})
    assert client.dead_purge("strict") == 1
    assert [d.fire for d in client.dead()] == [other]
    assert r.hget(K.attempts, mine) is None and r.hget(K.payloads, mine) is None
    assert client.dead_purge() == 1 and client.dead() == []


# -- a real worker -------------------------------------------------------------------------
@pytest.fixture
def running(redis_url: str, tmp_path: Path) -> Iterator[tuple[Client, Path]]:
    """A planner tick and one worker thread on every-second and blocking jobs."""
    ledger = tmp_path / "ledger.jsonl"
    path = write_jobs(tmp_path / "schedules.yaml", {
        "tick": {"cron": "* * * * * *", "call": "cronsvc.testing.ledger:record",
                 "kwargs": {"path": str(ledger)}},
        "slow": {"cron": "0 0 1 1 *", "call": "cronsvc.testing.ledger:block",
                 "kwargs": {"path": str(ledger), "release": str(tmp_path / "release")}},
    })
    Planner(path, connect(redis_url), horizon=60).tick()
    worker = Worker(load_config(path), connect(redis_url), concurrency=2, grace=10)
    thread = threading.Thread(target=worker.run_forever, daemon=True)
    thread.start()
    try:
        yield Client(redis_url, config=str(path)), ledger
    finally:
        (tmp_path / "release").touch()
        worker.stop()
        thread.join(30)


def started(ledger: Path, name: str) -> dict[str, dict[str, Any]]:
    return {e["fire"]: e for e in read_ledger(ledger) if e["job"] == name
            and e["event"] == "start"}


def test_no_fire_claimed_after_pause_starts_and_triggers_still_run(
        running: tuple[Client, Path], r: redis.Redis) -> None:
    client, ledger = running
    wait_for(lambda: started(ledger, "tick"), message="a first run")
    paused = client.pause("tick")
    allowed = set(started(ledger, "tick")) | {f.fire for f in paused.in_flight}
    wait_for(lambda: [h for h in client.history("tick", 50) if h["reason"] == "paused"
                      and h["scheduled"] > paused.since_ms], message="a fire skipped as paused")
    assert set(started(ledger, "tick")) <= allowed
    assert all(e["scheduled_ms"] <= paused.since_ms for e in started(ledger, "tick").values())
    trig = client.trigger("tick")
    wait_for(lambda: trig in started(ledger, "tick"), message="the trigger of a paused job")
    client.resume("tick")
    resumed = server_ms(r)
    wait_for(lambda: [e for e in started(ledger, "tick").values()
                      if e["scheduled_ms"] > resumed], message="a run after resume")


def test_pause_wait_returns_once_the_run_in_flight_ended(running: tuple[Client, Path],
                                                         tmp_path: Path) -> None:
    client, ledger = running
    fid = client.trigger("slow")
    wait_for(lambda: fid in started(ledger, "slow"), message="the blocking run")
    with pytest.raises(StillRunning):
        client.pause("slow", wait=0.2)
    assert client.resume("slow")
    result: list[Any] = []
    waiting = threading.Thread(target=lambda: result.append(client.pause("slow", wait=30)))
    waiting.start()
    wait_for(lambda: client.job("slow").paused, message="the pause, taken while the run holds")
    (tmp_path / "release").touch()
    waiting.join(30)
    (done,) = result
    assert done.waited and [f.fire for f in done.in_flight] == [fid]
    assert [e["fire"] for e in read_ledger(ledger) if e["event"] == "end"] == [fid]
    assert client.fire_state(fid) == "done"
