"""The claim and ack calls of a burst of runtime schedules (bench/schedules.py's burst), made
from here with no workers: each fire a schedule of its own (``max_runs: 1``) of one job,
claimed in calls of ``--batch`` with the scan a worker asks for, then acked in calls of
``--batch`` with records as a worker writes them, ``--others`` leases of other fires in
flight meanwhile (``--payloads``: each schedule with a payload of its own; ``--cron``: fires
of 1,000 jobs' own schedules instead, all of one policy line, or with ``--distinct`` each
job's own). Prints the Redis CPU time of each side; with ``--callgrind`` the redis-server
runs under ``valgrind --tool=callgrind`` (instrumented over the claims and over the acks
only) and the instructions per fire of each side are printed instead; ``--lua DIR`` runs
the scripts of another version's lua/.

Run: ``.venv/bin/python -m bench.burst_calls --fires 3000 --callgrind``.
"""

from __future__ import annotations

import argparse
import json
import os
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import redis

from bench.claim import prepare as claim_prepare
from bench.common import K
from bench.schedules import job_file
from cronsvc.client.client import Client
from cronsvc.fires import job_of
from cronsvc.process.redis_server import RedisServer, find_redis_server
from cronsvc.store.scripts import Scripts, ack_call, load_sources

SCAN = 200  # the scan a worker asks for (cronsvc/worker/worker.py SCAN_LIMIT)
HISTORY = 10  # bench/schedules.py's job file


def server_ms(r: redis.Redis) -> int:
    sec, usec = r.time()
    return int(sec) * 1000 + int(usec) // 1000


def prepare(r: redis.Redis, path: Path, url: str, fires: int, others: int,
            cron: bool = False, payloads: bool = False, distinct: bool = False) -> None:
    """``fires`` burst schedules with their one fire due a second ago (``cron``: fires of
    1,000 jobs' own schedules instead, as bench/claim.py plans them), and ``others`` cron
    fires of another job leased far ahead (in flight beside the burst); ``payloads``: each
    schedule with a payload of its own (no two stored lines alike); ``distinct``: with
    ``cron``, each job a definition of its own."""
    client = Client(url, config=str(path))
    client.publish_config()
    now = server_ms(r)
    if cron:
        claim_prepare(r, Scripts(r), fires, 1000, now - 86_400_000, distinct)
        fires = 0
    due = (now // 60_000 + 2) * 60_000
    for i in range(0, fires, 1000):
        client.upsert_schedules([{"id": f"burst:{j}", "job": "digest", "cron": "* * * * *",
                                  "start": due, "max_runs": 1,
                                  **({"payload": {"n": j}} if payloads else {})}
                                 for j in range(i, min(i + 1000, fires))])
    if fires:
        queued = [m.decode() for m in r.zrange(K.queue, 0, -1)]
        assert len(queued) == fires, f"{len(queued)} fires queued of {fires}"
        r.zadd(K.queue, {fid: now - 1000 for fid in queued})
    if others:
        pipe = r.pipeline(transaction=False)
        for i in range(others):
            fid = f"other@{now - 10_000 - i}"
            pipe.zadd(K.working, {fid: now + 3_600_000})
            pipe.hset(K.attempts, fid, 1)
        pipe.execute()


def record(fid: str, token: int, due: int, started: int) -> str:
    return json.dumps({"fire": fid, "job": job_of(fid), "status": "ok", "reason": None,
                       "scheduled": due, "started": started, "duration_ms": 0,
                       "attempt": token, "worker": "worker-0", "exit_code": None,
                       "output": None}, separators=(",", ":"))


def claims(s: Scripts, batch: int) -> list[tuple[str, int, int]]:
    got: list[tuple[str, int, int]] = []
    while True:
        res = s.claim(K, "worker-0", batch=batch, lease_ms=60_000, scan_limit=SCAN)
        if not res.claimed:
            return got
        got += [(c.fire_id, c.token, c.due_ms) for c in res.claimed]


def acks(r: redis.Redis, s: Scripts, got: list[tuple[str, int, int]], batch: int) -> None:
    now = server_ms(r)
    sha = s._scripts["ack"].sha
    calls = []
    for i in range(0, len(got), batch):
        items = [(fid, token, job_of(fid), record(fid, token, due, now))
                 for fid, token, due in got[i:i + batch]]
        calls.append(ack_call(K, items, HISTORY))
    for keys, args in calls:
        reply = r.evalsha(sha, len(keys), *keys, *args)
        assert reply == [], reply  # the fires not acked: none


def cpu_s(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def instructions(out: str) -> int:
    for line in Path(out).read_text().splitlines():
        if line.startswith("totals:"):
            return int(line.split()[1])
    raise RuntimeError(f"no totals in {out}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fires", type=int, default=3000)
    ap.add_argument("--batch", type=int, default=100)
    ap.add_argument("--others", type=int, default=200)
    ap.add_argument("--callgrind", action="store_true")
    ap.add_argument("--payloads", action="store_true",
                    help="each schedule with a payload of its own")
    ap.add_argument("--lua", type=Path, help="the scripts of this lua/ directory instead")
    ap.add_argument("--cron", action="store_true",
                    help="fires of jobs' own schedules (bench/claim.py's) instead")
    ap.add_argument("--distinct", action="store_true",
                    help="with --cron: each job a definition of its own (no two lines alike)")
    opts = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "callgrind.out"
        if opts.callgrind:
            wrapper = Path(tmp) / "redis-server"
            wrapper.write_text(f"#!/bin/sh\nexec valgrind --tool=callgrind --instr-atstart=no "
                               f"--callgrind-out-file={out}.%p {find_redis_server()} \"$@\"\n")
            wrapper.chmod(wrapper.stat().st_mode | stat.S_IEXEC)
            os.environ["CRONSVC_REDIS_SERVER"] = str(wrapper)
        server = RedisServer(tmp)
        server.start(timeout=120)
        try:
            r = redis.Redis.from_url(server.url)
            s = Scripts(r)
            if opts.lua is not None:
                s.sources = load_sources(opts.lua)
                s._scripts = {n: r.register_script(src.text) for n, src in s.sources.items()}
            for name in ("claim", "ack"):
                r.script_load(s.sources[name].text)
            prepare(r, job_file(Path(tmp)), server.url, opts.fires, opts.others, opts.cron,
                    opts.payloads, opts.distinct)
            pid = server.proc.pid
            got: list[tuple[str, int, int]] = []
            for side in ("claim", "ack"):
                if opts.callgrind:
                    subprocess.run(["callgrind_control", "-z", str(pid)], check=True,
                                   capture_output=True)
                    subprocess.run(["callgrind_control", "-i", "on", str(pid)], check=True,
                                   capture_output=True)
                c0, t0 = cpu_s(pid), time.perf_counter()
                if side == "claim":
                    got = claims(s, opts.batch)
                    assert len(got) == opts.fires, f"claimed {len(got)} of {opts.fires}"
                else:
                    acks(r, s, got, opts.batch)
                used, took = cpu_s(pid) - c0, time.perf_counter() - t0
                if opts.callgrind:
                    subprocess.run(["callgrind_control", "-i", "off", str(pid)], check=True,
                                   capture_output=True)
                    subprocess.run(["callgrind_control", "-d", side, str(pid)], check=True,
                                   capture_output=True)
                    dumps = sorted(Path(tmp).glob(f"callgrind.out.{pid}.*"),
                                   key=lambda p: p.stat().st_mtime)
                    n = instructions(str(dumps[-1]))
                    if os.environ.get("BURST_KEEP"):
                        Path(os.environ["BURST_KEEP"]).mkdir(parents=True, exist_ok=True)
                        dumps[-1].rename(Path(os.environ["BURST_KEEP"]) / f"{side}.out")
                    print(f"{side}: {n / opts.fires / 1000:.1f}k instructions a fire")
                else:
                    print(f"{side}: {used / opts.fires * 1e6:.1f} µs of redis-server CPU a "
                          f"fire, {took / opts.fires * 1e6:.1f} µs of wall time")
        finally:
            server.stop(timeout=60)
    sys.stdout.flush()


if __name__ == "__main__":
    main()
