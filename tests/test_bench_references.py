"""The same-run references of the cost bench (bench/cost.py) do the work they are named for:
the worker's own steps claim, record and ack every fire; the plain commands make the writes
of claim + ack and leave nothing behind."""

from __future__ import annotations

import json

from bench.claim import K, plain_commands, primitives
from bench.cost import CONCURRENCY, prepared
from cronsvc.fires import job_of

FIRES = 2000  # two a job (bench.cost.JOBS)


def test_primitives_claims_records_and_acks_every_fire() -> None:
    with prepared(FIRES) as (r, s, queued, _):
        assert len(queued) == FIRES
        assert primitives(s, CONCURRENCY, FIRES) > 0
        assert r.zcard(K.queue) == 0 and r.zcard(K.working) == 0
        assert r.hlen(K.claims) == 0
        records = [json.loads(x) for fid in queued[:5]
                   for x in r.lrange(K.history(job_of(fid)), 0, -1)]
        assert {rec["fire"] for rec in records} >= set(queued[:5])
        assert {rec["status"] for rec in records} == {"ok"}
        assert {rec["worker"] for rec in records} == {"bench"}


def test_plain_commands_make_the_writes_and_leave_nothing_in_flight() -> None:
    with prepared(FIRES) as (r, _, queued, _):
        assert plain_commands(r, queued, CONCURRENCY) > 0
        assert r.zcard(K.queue) == 0 and r.zcard(K.working) == 0
        assert r.hlen(K.claims) == 0
        fid = queued[0]
        assert r.hget(K.attempts, fid) is None
        assert r.llen(K.history(job_of(fid))) >= 1
