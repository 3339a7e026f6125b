"""Redis Cluster: every script of a shard stays in one slot, and a dead master stops only
the shards it serves.

Three real cluster-enabled redis-servers (tests/support/cluster.py), a cluster client from
``connect``, and the shard keys of ``Keys(shard=k)``.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
import redis
import yaml
from redis.cluster import RedisCluster
from redis.exceptions import RedisClusterException

from cronsvc.clock import FixedClock
from cronsvc.config.models import Config, load_config
from cronsvc.errors import RedisUnavailable
from cronsvc.fires import fire_id, new_tag
from cronsvc.keys import Keys, keys_for, shard_of
from cronsvc.planner.planner import Planner
from cronsvc.store.acl import acl_setuser_args
from cronsvc.store.connection import connect
from cronsvc.store.scripts import Scripts
from cronsvc.testing import Fleet, read_ledger
from cronsvc.worker.worker import Worker
from tests.support.cluster import LocalCluster
from tests.support.servers import server_binary
from tests.support.wait import wait_for

pytestmark = pytest.mark.slow

T0 = 1_763_830_000_000
MIN = 60_000
D1 = "d1d1d1d1d1d1"
LINE = f"{D1}|all|0|allow|3|0"
SPEC = '{"cron":"* * * * *","timezone":"UTC","jitter":0}'


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    nodes = LocalCluster(tmp_path_factory.mktemp("cluster"), server_binary())
    try:
        yield nodes.start()
    finally:
        nodes.stop()


@pytest.fixture
def rc(cluster: LocalCluster) -> Iterator[redis.Redis]:
    client = connect(cluster.url)
    client.flushall()  # a cluster client sends these to every master
    client.script_flush()
    yield client
    client.close()


def jobs_on_every_shard(shards: int) -> dict[int, str]:
    """One job name per shard."""
    found: dict[int, str] = {}
    n = 0
    while len(found) < shards:
        name = f"job-{n}"
        found.setdefault(shard_of(name, shards) or 0, name)
        n += 1
    return dict(sorted(found.items()))


def publish_and_plan(s: Scripts, jobs: dict[int, str], shards: int, n_fires: int) -> None:
    for job in jobs.values():
        k = keys_for(job, shards)
        assert s.publish(k, [(job, "-", LINE, SPEC)], generation=1, now_ms=T0).changed == 1
        dues = [T0 + i * MIN for i in range(1, n_fires + 1)]
        assert s.plan(k, [(job, D1, dues[-1], dues)]).added == n_fires


def test_connect_gives_a_cluster_client(cluster: LocalCluster) -> None:
    port = cluster.nodes[0].port
    assert isinstance(connect(cluster.url), RedisCluster)
    # One startup node is enough: the client learns the others from it.
    assert isinstance(connect(f"redis+cluster://127.0.0.1:{port}"), RedisCluster)
    assert isinstance(connect(f"redis://127.0.0.1:{port}/0", cluster=True), RedisCluster)
    assert type(connect(f"redis://127.0.0.1:{port}/0")) is redis.Redis
    with pytest.raises(RedisUnavailable, match="only database 0"):
        connect(f"redis+cluster://127.0.0.1:{port}/1")


@pytest.mark.parametrize("shards", [3, 4, 5, 6])
def test_scripts_on_every_shard(cluster: LocalCluster, rc: redis.Redis, shards: int) -> None:
    s = Scripts(rc)
    jobs = jobs_on_every_shard(shards)
    publish_and_plan(s, jobs, shards, 3)
    assert len({cluster.master_of(Keys(shard=k).queue).port for k in jobs}) > 1

    for shard, job in jobs.items():
        k = keys_for(job, shards)
        assert k.shard == shard
        res = s.claim(k, "w1", batch=5, lease_ms=10 * MIN, now_ms=T0 + 2 * MIN)
        first, second = res.claimed
        assert [first.fire_id, second.fire_id] == [fire_id(job, T0 + i * MIN) for i in (1, 2)]
        assert res.next_ms == T0 + 3 * MIN
        s.ack(k, first.fire_id, first.token, job, {"status": "ok"})
        # The second ack of `first` finds its lease gone: one batch, one slot, two verdicts.
        assert s.ack_many(k, [(second.fire_id, second.token, job, {"status": "ok"}),
                              (first.fire_id, first.token, job, {"status": "ok"})]) == [True, False]
        assert len(rc.lrange(k.history(job), 0, -1)) == 2
        # A backfill reads the record of runs of the fires' own shard: one slot.
        assert s.backfill(k, job, job, [fire_id(job, T0 + 9 * MIN)], queue=False) == ["to run"]

        # Paused: the cron fire is dropped, an explicit trigger still runs, with its payload.
        rc.hset(k.paused, job, json.dumps({"note": "cluster test", "since": T0}))
        trig = fire_id(job, T0 + 3 * MIN, new_tag("trigger"))
        assert s.enqueue(k, trig, T0 + 3 * MIN, {"shard": shard})
        res = s.claim(k, "w2", batch=5, now_ms=T0 + 3 * MIN)
        assert res.dropped == [(fire_id(job, T0 + 3 * MIN), "paused")]
        assert [(c.fire_id, c.payload) for c in res.claimed] == [(trig, {"shard": shard})]
        assert s.ack_many(k, [(trig, res.claimed[0].token, job, {"status": "ok"})]) == [True]
        assert rc.zcard(k.queue) == 0 and rc.zcard(k.working) == 0

    # What a planner reads across shards in one pipeline: the cluster client splits it by node.
    pipe = rc.pipeline(transaction=False)
    for k in range(shards):
        pipe.hgetall(Keys(shard=k).jobs)
    assert [list(h) for h in pipe.execute()] == [[job] for job in jobs.values()]


def test_acl_user_on_the_cluster(cluster: LocalCluster, rc: redis.Redis) -> None:
    """The cluster client needs CLUSTER SLOTS and COMMAND on top of the usual list."""
    args = acl_setuser_args("cronsvc", "pw", cluster=True)
    for node in cluster.nodes:  # ACLs are per node
        with cluster.admin(node) as admin:
            admin.execute_command("ACL", "SETUSER", *args)
    try:
        url = cluster.url.replace("redis+cluster://", "redis+cluster://cronsvc:pw@")
        s = Scripts(connect(url))
        jobs = jobs_on_every_shard(3)
        publish_and_plan(s, jobs, 3, 1)
        for shard, job in jobs.items():
            k = Keys(shard=shard)
            (claim,) = s.claim(k, "w", now_ms=T0 + MIN).claimed
            assert s.ack_many(k, [(claim.fire_id, claim.token, job, "{}")]) == [True]
        with pytest.raises(RedisUnavailable) as err:
            connect(url.replace(":pw@", ":nope@"))
        assert "nope" not in str(err.value) and "cronsvc:***@" in str(err.value)
    finally:
        for node in cluster.nodes:
            with cluster.admin(node) as admin:
                admin.acl_deluser("cronsvc")


def test_unsharded_keys_cross_slots(rc: redis.Redis) -> None:
    """Without shards the keys carry no hash tag: a cluster needs ``shards`` of 2 or more."""
    with pytest.raises(RedisClusterException, match="same key slot"):
        Scripts(rc).claim(Keys(), "w")


def test_wakeup_reaches_a_subscriber_through_the_cluster(rc: redis.Redis) -> None:
    channel = Keys(shard=2).wakeup
    sub = rc.pubsub(ignore_subscribe_messages=True)
    sub.subscribe(channel)
    try:
        message = wait_for(lambda: rc.publish(channel, "plan") and sub.get_message(timeout=0.2),
                           message="the wake-up message")
        assert message["channel"] == channel and message["data"] == "plan"
    finally:
        sub.close()


def test_a_dead_master_stops_only_its_shards(tmp_path: Path) -> None:
    nodes = LocalCluster(tmp_path / "cluster", server_binary()).start()
    try:
        shards = 6
        client = connect(nodes.url)
        s = Scripts(client)
        jobs = jobs_on_every_shard(shards)
        publish_and_plan(s, jobs, shards, 4)
        victim = nodes.master_of(Keys(shard=0).queue)
        dead = {k for k in jobs if nodes.master_of(Keys(shard=k).queue) is victim}
        live = set(jobs) - dead
        assert dead and live

        victim.kill()
        # A surviving master that restarted has lost its script cache: scripts must load
        # again on it although one master is down.
        for node in nodes.nodes:
            if node is not victim:
                with nodes.admin(node) as admin:
                    admin.script_flush()
        late = Scripts(connect(nodes.url))  # a worker starting now still gets in

        for round_ in (1, 2):
            for shard in sorted(live):
                k = Keys(shard=shard)
                res = late.claim(k, f"w{round_}", batch=2, now_ms=T0 + 4 * MIN)
                assert [c.fire_id for c in res.claimed] == [
                    fire_id(jobs[shard], T0 + i * MIN) for i in (2 * round_ - 1, 2 * round_)]
                acks = [(c.fire_id, c.token, c.job, {"status": "ok"}) for c in res.claimed]
                assert late.ack_many(k, acks) == [True, True]
            for shard in sorted(dead):
                with pytest.raises(redis.ConnectionError, match=f"127.0.0.1:{victim.port}"):
                    late.claim(Keys(shard=shard), "w", now_ms=T0 + 4 * MIN)
                with pytest.raises(redis.ConnectionError, match=f"127.0.0.1:{victim.port}"):
                    s.ack_many(Keys(shard=shard), [(fire_id(jobs[shard], T0 + MIN), 1,
                                                    jobs[shard], {"status": "ok"})])

        # A worker across all shards keeps running the live shards' fires.
        for shard in sorted(live):
            late.enqueue(Keys(shard=shard), fire_id(jobs[shard], T0, new_tag("trigger")), T0)
        worker = Worker(cluster_config(tmp_path, jobs, shards), connect(nodes.url),
                        concurrency=4, worker_id="w-live")
        thread = threading.Thread(target=worker.run_forever)
        thread.start()
        try:
            for shard in sorted(live):
                wait_for(lambda shard=shard: late.client.llen(  # type: ignore[misc]
                    keys_for(jobs[shard], shards).history(jobs[shard])) >= 5,
                    message=f"the rest of shard {shard}'s fires to run")
        finally:
            worker.stop()
            thread.join(30)
        assert not thread.is_alive()

    finally:
        nodes.stop()


def test_a_running_planner_plans_the_live_shards_when_a_master_dies(tmp_path: Path) -> None:
    nodes = LocalCluster(tmp_path / "cluster", server_binary()).start()
    try:
        shards = 6
        jobs = jobs_on_every_shard(shards)
        cluster_config(tmp_path, jobs, shards)
        clock = FixedClock(T0)
        planner = Planner(tmp_path / "cluster.yaml", connect(nodes.url), clock=clock)
        assert planner.tick().verdict == "publish"
        client = connect(nodes.url)
        before = {k: client.zcard(Keys(shard=k).queue) for k in jobs}
        # The first shard holds the fleet's keys (generation, presence): the planner keeps
        # the file it decided on and plans every shard it can reach.
        victim = nodes.master_of(Keys(shard=0).queue)
        dead = {k for k in jobs if nodes.master_of(Keys(shard=k).queue) is victim}
        live = set(jobs) - dead
        victim.kill()
        clock.advance(30 * MIN)
        stats = planner.tick()
        assert stats.failed_shards == len(dead) and stats.verdict == "current"
        for shard in sorted(live):
            assert client.zcard(Keys(shard=shard).queue) == before[shard] + 30
    finally:
        nodes.stop()


def cluster_config(tmp_path: Path, jobs: dict[int, str], shards: int) -> Config:
    doc = {"redis": {"shards": shards, "cluster": True},
           "jobs": {name: {"cron": "* * * * *", "call": "cronsvc.examples:ping"}
                    for name in jobs.values()}}
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump(doc))
    return load_config(path)


def test_runtime_schedules_of_one_job_spread_over_the_shards_and_run(
        cluster: LocalCluster, rc: redis.Redis, tmp_path: Path) -> None:
    shards = 6
    setting = {"shards": shards, "cluster": True}
    fleet = Fleet(tmp_path, cluster.url, {}, redis=setting)
    digest = fleet.call_job("0 0 1 1 *")
    del digest["cron"]  # runs only through runtime schedules
    fleet.write({"digest": digest}, redis=setting)
    fleet.planner()
    fleet.worker("worker-1", "--concurrency", "50")
    try:
        c = fleet.client()
        # The planner copies the job's line to every shard; until then an upsert says so.
        wait_for(lambda: all(rc.hexists(Keys(shard=k).job_lines, "digest")
                             for k in range(shards)), message="the job on every shard")
        soon = datetime.fromtimestamp(c.server_ms() / 1000 + 2, UTC)
        ids = [f"digest:user-{n}" for n in range(300)]
        outcomes = c.upsert_schedules([{"id": sid, "job": "digest", "every": "1h",
                                        "anchor": soon, "payload": {"n": n}}
                                       for n, sid in enumerate(ids)])
        assert outcomes == ["created"] * 300

        per_shard = {k: rc.hlen(Keys(shard=k).schedules) for k in range(shards)}
        assert sum(per_shard.values()) == 300 and min(per_shard.values()) > 0, per_shard
        per_master: dict[int, int] = {}
        for k, n in per_shard.items():
            port = cluster.master_of(Keys(shard=k).schedules).port
            per_master[port] = per_master.get(port, 0) + n
        assert len(per_master) == 3, per_master  # no master holds them all
        assert c.count_schedules(job="digest") == 300

        # Each fire is claimed on its schedule's shard, by the job's line copied there.
        def started() -> dict[str, int]:
            runs = [e for e in read_ledger(fleet.ledger) if e["event"] == "start"]
            return {e["schedule"]: e["payload"]["n"] for e in runs}
        wait_for(lambda: len(started()) == 300, timeout=60, message="every schedule to fire")
        assert started() == {sid: n for n, sid in enumerate(ids)}
        assert len(read_ledger(fleet.ledger)) == 300  # none twice
        # A run starts before its result is recorded: wait for the acks of the last ones.
        ran = {e["fire"] for e in read_ledger(fleet.ledger)}
        wait_for(lambda: {h["fire"] for h in c.history("digest", 400)} >= ran,
                 message="every run in the history merged over the shards")

        # A paused job is paused on every shard: its schedules' fires are skipped there.
        c.pause("digest", "holiday")
        later = datetime.fromtimestamp(c.server_ms() / 1000 + 2, UTC)
        c.upsert_schedules([{"id": f"p:{n}", "job": "digest", "every": "1h", "anchor": later}
                            for n in range(60)])
        wait_for(lambda: sum(h["reason"] == "paused" for h in c.history("digest", 400)) == 60,
                 timeout=60, message="the paused job's fires to be skipped on every shard")
        assert len(read_ledger(fleet.ledger)) == 300
    finally:
        fleet.stop_all()
