"""Redis error replies are outages: workers and planners ride them out, and say so.

Error replies are taken from a real redis-server of the test's own (CONFIG and
REPLICAOF changes stay there); the fleet is real planner and worker processes.
"""

from __future__ import annotations

import collections
import hashlib
import re
import signal
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from cronsvc.client.client import Client
from cronsvc.clock import FixedClock
from cronsvc.config.models import Config, parse_config
from cronsvc.keys import Keys
from cronsvc.process.redis_server import RedisServer, free_port
from cronsvc.run.watchdog import margin
from cronsvc.store.connection import connect
from cronsvc.store.faults import ErrorLog, describe, is_outage, reply_code
from cronsvc.store.scripts import Scripts, load_sources
from cronsvc.testing import BLOCK, Fleet, history, read_ledger
from cronsvc.worker.leases import RETRY_S, period
from cronsvc.worker.worker import Worker
from tests.support.wait import wait_for

K = Keys()
# Renewed every 4 s: a fault that ends after the first failed renewal ends well before the
# worker must stop the run because its lease may lapse.
LEASE_S = 12


def server_ms(r: redis.Redis) -> int:
    sec, usec = r.time()
    return int(sec) * 1000 + int(usec) // 1000


def caught(action: Callable[[], Any]) -> BaseException:
    try:
        action()
    except Exception as exc:  # the error reply under test
        return exc
    pytest.fail("no error was raised")


def busy_reply(r: redis.Redis, url: str) -> BaseException:
    """What a command gets while a script runs past lua-time-limit."""
    r.config_set("lua-time-limit", 10)
    looping = redis.Redis.from_url(url)
    ended: list[BaseException] = []

    def loop() -> None:
        try:
            looping.eval("while true do end", 0)
        except redis.ResponseError as exc:  # killed below
            ended.append(exc)

    thread = threading.Thread(target=loop)
    thread.start()
    try:
        return wait_for(lambda: _busy(r), message="a BUSY reply")
    finally:
        r.script_kill()
        thread.join(10)
        looping.close()
        assert ended, "the looping script was not killed"


def _busy(r: redis.Redis) -> BaseException | None:
    try:
        r.ping()
    except redis.ResponseError as exc:
        return exc
    return None


@pytest.fixture(scope="module")
def replies(redis_server: RedisServer, tmp_path_factory: pytest.TempPathFactory
            ) -> Iterator[dict[str, BaseException]]:
    """Real error replies of a server of this module's own, by what caused them."""
    server = RedisServer(tmp_path_factory.mktemp("faults"), binary=redis_server.binary).start()
    r = redis.Redis.from_url(server.url, decode_responses=True)
    s = Scripts(r)
    found: dict[str, BaseException] = {}
    try:
        r.set("text", "x")
        s.publish(K, [("a", "-", "d|all|0|allow|1|0|x", "{}")], generation=1)
        found["wrong type"] = caught(lambda: r.lpush("text", 1))
        found["unknown command"] = caught(lambda: r.execute_command("NOSUCHCOMMAND"))
        found["unknown script"] = caught(lambda: r.evalsha("0" * 40, 0))
        found["script's own error"] = caught(
            lambda: s.ack(K, "a@1", 7, "a", {"status": "ok"}))
        r.zadd(K.queue, {"a@1": 1})
        r.set(K.working, "x")
        found["wrong type in a script"] = caught(lambda: s.claim(K, "w"))
        r.delete(K.working)
        [held] = s.claim(K, "w").claimed

        def renew() -> None:  # a script whose first write may grow memory (ZADD)
            s.heartbeat(K, 1000, [(held.fire_id, held.token)])

        r.config_set("maxmemory", 1)
        found["OOM of a command"] = caught(lambda: r.set("y", 1))
        found["OOM in a script"] = caught(renew)
        r.config_set("maxmemory", 0)
        r.replicaof("127.0.0.1", free_port())  # a master that never answers: data stays
        found["READONLY of a command"] = caught(lambda: r.set("y", 1))
        found["READONLY in a script"] = caught(renew)
        r.replicaof("no", "one")
        found["BUSY"] = busy_reply(r, server.url)
        found["connection refused"] = caught(
            lambda: redis.Redis(port=free_port(), retry=Retry(NoBackoff(), 0)).ping())
        yield found
    finally:
        r.close()
        server.stop()


@pytest.mark.parametrize(("cause", "code", "outage"), [
    ("OOM of a command", "OOM", True),
    ("OOM in a script", "OOM", True),
    ("READONLY of a command", "READONLY", True),
    ("READONLY in a script", "READONLY", True),
    ("unknown script", "NOSCRIPT", True),
    ("BUSY", "BUSY", True),
    ("connection refused", None, True),
    ("wrong type", "WRONGTYPE", False),
    ("wrong type in a script", "WRONGTYPE", False),
    ("unknown command", None, False),
    ("script's own error", "LEASE_LOST", False),
])
def test_reply_code_and_is_outage_of_real_replies(
        replies: dict[str, BaseException], cause: str, code: str | None, outage: bool) -> None:
    exc = replies[cause]
    assert (reply_code(exc), is_outage(exc)) == (code, outage), repr(exc)


@pytest.mark.parametrize("cause", ["OOM of a command", "OOM in a script", "READONLY of a command",
                                   "READONLY in a script", "unknown script", "BUSY",
                                   "wrong type", "wrong type in a script"])
def test_a_described_error_reply_names_its_code_whatever_redis_py_leaves_in_the_message(
        replies: dict[str, BaseException], cause: str) -> None:
    # redis-py 8 raises OutOfMemoryError('command not allowed ...'): the code is the class's.
    exc = replies[cause]
    code = reply_code(exc)
    assert code is not None and re.search(rf"(^|[\s:-]){code}\b", describe(exc)), (
        repr(exc), describe(exc))
    assert " ".join(str(exc).split()) in describe(exc)


def test_error_log_keeps_the_last_error_and_counts_codes(
        replies: dict[str, BaseException]) -> None:
    log = ErrorLog(FixedClock(1000))
    assert log.as_info() is None
    assert log.note(replies["OOM in a script"]) == "OOM"
    assert log.note(replies["connection refused"]) == "ConnectionError"
    assert log.note(replies["OOM of a command"]) == "OOM"
    assert log.counts == {"OOM": 2, "ConnectionError": 1}
    info = log.as_info()
    assert info is not None and (info["code"], info["at"]) == ("OOM", 1000)
    assert "maxmemory" in str(info["message"])


# -- status ------------------------------------------------------------------------------------
def worker_config() -> Config:
    return parse_config("jobs:\n  a:\n    cron: '0 0 1 1 *'\n    command: ['true']\n", "w.yaml")


def memory_warnings(status: Any) -> list[str]:
    return [w for w in status.warnings if "(maxmemory)" in w]


def test_status_shows_memory_against_maxmemory_and_recent_redis_errors(
        fresh_server: Callable[..., RedisServer]) -> None:
    server = fresh_server()
    r = redis.Redis.from_url(server.url, decode_responses=True)
    client = Client(server.url)
    status = client.status()
    assert status.maxmemory == 0 and status.used_memory and status.used_memory > 0
    assert memory_warnings(status) == []
    used = status.used_memory
    r.config_set("maxmemory", used * 4)
    assert client.status().maxmemory == used * 4 and memory_warnings(client.status()) == []

    def near_full() -> Any:
        """A status read while memory is between 90 and 100 % of maxmemory."""
        r.config_set("maxmemory", int(client.status().used_memory / 0.95))  # type: ignore[operator]
        found = client.status()
        ratio = found.used_memory / found.maxmemory  # type: ignore[operator]
        return found if 0.9 <= ratio < 1 else None

    [near] = memory_warnings(wait_for(near_full, message="memory at 90 to 100 % of maxmemory"))
    assert near.startswith("Redis uses ") and "writes fail" not in near
    r.config_set("maxmemory", 1)
    [full] = memory_warnings(client.status())
    assert "of 1 bytes (maxmemory): writes fail with OOM" in full
    r.config_set("maxmemory", 0)

    # Members name the Redis errors they saw in the last ten minutes.
    oom = caught(lambda: _oom(r))
    recent = Worker(worker_config(), connect(server.url), worker_id="recent")
    recent.errors.note(oom)
    recent._presence()
    old = Worker(worker_config(), connect(server.url), worker_id="old")
    old.errors = ErrorLog(FixedClock(server_ms(r) - 11 * 60_000))
    old.errors.note(oom)
    old._presence()
    quiet = Worker(worker_config(), connect(server.url), worker_id="quiet")
    quiet._presence()
    warnings = client.status().warnings
    [seen] = [w for w in warnings if "saw a Redis error" in w]
    assert seen.startswith("recent saw a Redis error ") and " OOM command not allowed" in seen
    assert {w.info["last_error"]["code"] for w in client.status().workers
            if w.info.get("last_error")} == {"OOM"}


def _oom(r: redis.Redis) -> None:
    r.config_set("maxmemory", 1)
    try:
        r.set("y", 1)
    finally:
        r.config_set("maxmemory", 0)


# -- real processes through a fault --------------------------------------------------------------
def starts(f: Fleet, job: str | None = None) -> list[dict[str, Any]]:
    return [e for e in read_ledger(f.ledger)
            if e["event"] == "start" and (job is None or e["job"] == job)]


def _readonly(r: redis.Redis) -> None:
    r.replicaof("127.0.0.1", free_port())  # its master never answers: the data stays


def met(log: str, what: str, code: str) -> bool:
    """Whether a line of ``log`` says ``what`` went wrong with the reply ``code``."""
    return any(what in line and code in line for line in log.splitlines())


FAULTS = {
    "OOM": (lambda r: r.config_set("maxmemory", 1), lambda r: r.config_set("maxmemory", 0)),
    "READONLY": (_readonly, lambda r: r.replicaof("no", "one")),
}


@pytest.mark.slow
@pytest.mark.parametrize("code", list(FAULTS))
def test_worker_and_planner_ride_out_error_replies_while_a_long_run_holds_its_fire(
        tmp_path: Path, fresh_server: Callable[..., RedisServer], code: str) -> None:
    begin, end = FAULTS[code]
    server = fresh_server()
    r = redis.Redis.from_url(server.url, decode_responses=True)
    f = Fleet(tmp_path, server.url, {})
    try:
        f.write({"slow": f.call_job("0 0 1 1 *", call=BLOCK),
                 "tick": f.call_job("* * * * * *")})
        f.planner()
        f.worker("worker-a", "--lease", str(LEASE_S))
        fid = f.trigger("slow")
        wait_for(lambda: starts(f, "slow") and starts(f, "tick"),
                 message="the long run and a scheduled one to start")
        begin(r)
        # Both processes meet it, the lease thread of the long run included.
        wait_for(lambda: met(f.log("worker-a"), "lease renewal failed", code)
                 and met(f.log("planner"), "cannot", code), timeout=LEASE_S,
                 message=f"both processes to meet {code}")
        during = Client(server.url).status()
        if code == "OOM":
            assert during.maxmemory == 1
            assert any("writes fail with OOM" in w for w in during.warnings), during.warnings
        held_until = r.zscore(K.working, fid)
        end(r)  # before the lease could lapse: the fire stays this run's
        restored = server_ms(r)
        # The lease thread renews again.
        wait_for(lambda: (r.zscore(K.working, fid) or 0) > (held_until or 0), timeout=LEASE_S,
                 message="the lease to be renewed after the fault")
        assert r.hget(K.attempts, fid) == "1", f.logs()
        Path(f.release).touch()
        wait_for(lambda: history(r, "slow"), message="the long run's result")
        # The claim loop and the planner carry on.
        wait_for(lambda: [e for e in starts(f, "tick") if e["scheduled_ms"] > restored + 1000],
                 message="a fire planned and run after the fault")
        status = wait_for(lambda: (s := Client(server.url).status()) and all(
            m.alive and (m.info.get("last_error") or {}).get("code") == code
            for m in (*s.planners, *s.workers)) and s, message="presence after the fault")
        [planner] = status.planners  # its id is host:pid, whatever its --name
        assert [w.id for w in status.workers] == ["worker-a"]
        for name in (planner.id, "worker-a"):
            assert any(w.startswith(f"{name} saw a Redis error") and code in w
                       for w in status.warnings), status.warnings
        assert [p.poll() for p in f.procs.values()] == [None, None], f.logs()
        f.stop_all()
        assert [p.returncode for p in f.procs.values()] == [0, 0], f.logs()
    finally:
        f.stop_all()
        r.close()
    runs = starts(f)
    assert [fire for fire, n in collections.Counter(e["fire"] for e in runs).items()
            if n > 1] == [], f.logs()
    assert [(e["fire"], e["attempt"]) for e in starts(f, "slow")] == [(fid, 1)]
    assert [(h["fire"], h["status"], h["attempt"]) for h in history(r, "slow")] == [
        (fid, "ok", 1)], f.logs()
    assert "Traceback" not in f.log("worker-a") + f.log("planner")


@pytest.mark.slow
def test_a_flushed_script_cache_is_loaded_again(
        tmp_path: Path, fresh_server: Callable[..., RedisServer]) -> None:
    server = fresh_server()
    r = redis.Redis.from_url(server.url, decode_responses=True)
    f = Fleet(tmp_path, server.url, {})
    shas = {name: hashlib.sha1(src.text.encode()).hexdigest()
            for name, src in load_sources().items()}
    try:
        f.write({"tick": f.call_job("* * * * * *")})
        f.planner()
        f.worker("worker-a")
        wait_for(lambda: starts(f, "tick"), message="a first run")
        wait_for(lambda: all(r.script_exists(shas["claim"], shas["plan"], shas["ack"])),
                 message="the scripts in use")
        r.script_flush()
        flushed = server_ms(r)
        wait_for(lambda: [e for e in starts(f, "tick") if e["scheduled_ms"] > flushed + 1000],
                 message="runs after the flush")
        wait_for(lambda: all(r.script_exists(shas["claim"], shas["plan"], shas["ack"])),
                 message="the planner's and the worker's scripts loaded again")
        assert [p.poll() for p in f.procs.values()] == [None, None], f.logs()
    finally:
        f.stop_all()
        r.close()
    assert [p.returncode for p in f.procs.values()] == [0, 0], f.logs()


# -- a lost lease is visible ----------------------------------------------------------------------
@pytest.mark.slow
def test_a_reclaim_is_logged_and_kept_as_an_attempt_of_its_own(
        tmp_path: Path, redis_url: str, r: redis.Redis) -> None:
    f = Fleet(tmp_path, redis_url, {})
    try:
        f.write({"slow": f.call_job("0 0 1 1 *", call=BLOCK)})
        f.worker("worker-a", "--lease", "1")
        fid = f.trigger("slow")
        wait_for(lambda: starts(f, "slow"), message="the first attempt to start")
        f.signal("worker-a", signal.SIGKILL)
        f.wait("worker-a")
        f.worker("worker-b", "--lease", "1")
        wait_for(lambda: len(starts(f, "slow")) == 2, message="the fire to start again")
        Path(f.release).touch()
        wait_for(lambda: any(h["status"] == "ok" for h in history(r, "slow")),
                 message="the second attempt's result")
    finally:
        f.stop_all()
    assert f"{fid}: reclaimed from worker-a (its lease lapsed); attempt 2" in f.log("worker-b")
    assert sorted((h["attempt"], h["status"], h["worker"], h["reason"])
                  for h in history(r, "slow")) == [
        (1, "lost", "worker-a", "lease lost: worker worker-a"), (2, "ok", "worker-b", None)]
    assert [(e["attempt"], e["worker"]) for e in starts(f, "slow")] == [
        (1, "worker-a"), (2, "worker-b")]


@pytest.mark.slow
def test_a_fault_that_ends_before_the_fence_costs_the_run_nothing(
        tmp_path: Path, fresh_server: Callable[..., RedisServer]) -> None:
    """A write spell that covers two renewals a period apart but ends before the fence: the
    renewals tried again soon after the first failed one renew the lease in time, and the run
    goes on as the fire's only attempt (a renewal only every period fenced it off)."""
    lease = 9.0  # renewed every 3 s; the fence stops a run 7 s after its last renewal
    spell = 2 * period(lease) + 0.2  # the renewals at +3 s and +6 s both fail
    fence = lease - 2 * margin(lease)
    assert spell + RETRY_S < fence - 0.4  # what the retries leave over, for a busy machine
    server = fresh_server()
    r = redis.Redis.from_url(server.url, decode_responses=True)
    f = Fleet(tmp_path, server.url, {})
    try:
        f.write({"slow": f.call_job("0 0 1 1 *", call=BLOCK)})
        f.worker("worker-a", "--lease", f"{lease:g}")
        fid = f.trigger("slow")
        wait_for(lambda: starts(f, "slow"), message="the run to start")
        # The spell begins as a renewal lands: the lease then has the most time left.
        first = wait_for(lambda: r.zscore(K.working, fid), message="the fire's lease")
        renewed = wait_for(lambda: (s := r.zscore(K.working, fid)) and s > first and s,
                           timeout=2 * lease, message="a renewal")
        r.config_set("maxmemory", 1)
        try:
            until = renewed - lease * 1000 + spell * 1000  # the renewal was sent at score-lease
            wait_for(lambda: server_ms(r) >= until, timeout=2 * lease, interval=0.01,
                     message="the spell to last its while")
        finally:
            r.config_set("maxmemory", 0)
        wait_for(lambda: (r.zscore(K.working, fid) or 0) > renewed, timeout=lease,
                 message="the lease to be renewed after the spell")
        Path(f.release).touch()
        wait_for(lambda: history(r, "slow"), message="the run's result")
    finally:
        f.stop_all()
        r.close()
    log = f.log("worker-a")
    assert "lease renewal failed" in log and "OOM" in log, log
    assert "stopping run" not in log, log
    assert [(e["fire"], e["attempt"]) for e in starts(f, "slow")] == [(fid, 1)], log
    assert [(h["status"], h["attempt"]) for h in history(r, "slow")] == [("ok", 1)], log
