"""The ``rq`` kind's job file keys, and what RQ does with a fire's delivery sent twice,
on the test's real Redis (RQ's keys on database 1): the same delivery is refused by RQ
itself, a later delivery of the fire (a retry) takes the earlier one's place."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from rq import Queue
from rq.serializers import JSONSerializer

from cronsvc.config.check import check_file, warnings
from cronsvc.config.models import load_config, parse_config
from cronsvc.errors import ConfigError
from cronsvc.kinds import KINDS
from cronsvc.kinds.rq import RqTarget, enqueue
from cronsvc.run.dispatch import FIELD, Delivery, safe_id, unsafe_id

FIRE = "digest@1767225600000"


@pytest.fixture
def queue(redis_url: str) -> Iterator[Queue]:
    connection = redis.Redis.from_url(redis_url.rsplit("/", 1)[0] + "/1")
    yield Queue("default", connection=connection, serializer=JSONSerializer)
    connection.close()


def delivery(attempt: int) -> Delivery:
    return Delivery(FIRE, "digest", 1767225600000, attempt, "cron:deliveries:x",
                    payload={"n": 1})


TARGET = RqTarget(func="proj.jobs.digest", args=("core",), kwargs={"size": 3},
                  options={"job_timeout": 600, "result_ttl": 60})


def test_a_fire_is_one_rq_job_with_its_delivery_in_meta(queue: Queue) -> None:
    said = enqueue(queue, TARGET, delivery(1))
    [job_id] = queue.job_ids
    assert unsafe_id(job_id) == FIRE and said == f"job {job_id} enqueued on default"
    job = queue.fetch_job(job_id)
    assert job is not None
    assert (job.func_name, job.args, job.kwargs) == ("proj.jobs.digest", ["core"], {"size": 3})
    assert (job.timeout, job.result_ttl) == (600, 60)
    assert Delivery.read(job.meta[FIELD]) == delivery(1)


def test_the_same_delivery_sent_again_is_refused_by_rq(queue: Queue) -> None:
    enqueue(queue, TARGET, delivery(1))
    said = enqueue(queue, TARGET, delivery(1))
    assert said == f"job {safe_id(FIRE)} already held by RQ (it refused a second)"
    assert queue.job_ids == [safe_id(FIRE)]


def test_a_later_delivery_replaces_one_that_ended_but_waits_for_one_running(
        queue: Queue) -> None:
    enqueue(queue, TARGET, delivery(1))
    job = queue.fetch_job(safe_id(FIRE))
    assert job is not None
    job.set_status("started")
    with pytest.raises(RuntimeError, match="an earlier delivery is still started"):
        enqueue(queue, TARGET, delivery(2))
    job.set_status("failed")
    said = enqueue(queue, TARGET, delivery(2))
    assert said.endswith("in place of an earlier delivery (failed)")
    assert queue.job_ids == [safe_id(FIRE)]
    again = queue.fetch_job(safe_id(FIRE))
    assert again is not None and again.meta[FIELD]["attempt"] == 2


@pytest.mark.parametrize(("rq", "error"), [
    ("{func: digest}", "jobs.d.rq.func: 'digest': expected 'package.module.function'"),
    ("{func: 'proj.jobs:digest'}",
     "jobs.d.rq.func: 'proj.jobs:digest': expected 'package.module.function'"),
    ("{func: proj.jobs.digest, options: {job_id: x, meta: {}}}",
     "jobs.d.rq: options may not set job_id, meta: cronsvc sets"),
    ("{func: proj.jobs.digest, options: {retry: 3}}", "jobs.d.rq: options: unknown retry"),
])
def test_a_bad_target_is_named_in_its_place(rq: str, error: str) -> None:
    with pytest.raises(ConfigError) as bad:
        parse_config(f"jobs:\n  d: {{every: 1m, rq: {rq}}}\n", "s.yaml")
    [problem] = bad.value.problems
    assert problem.startswith(f"s.yaml:2: {error}"), problem


def test_rq_s_redis_is_shown_without_its_password_and_warned_of(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text("jobs:\n  d:\n    every: 1m\n    timeout: 10m\n"
                    "    rq: {func: proj.jobs.digest, redis: 'redis://:hunter2@rq:6379/0'}\n")
    shown = KINDS["rq"].shown(load_config(path).jobs["d"])
    assert shown == {"rq": {"func": "proj.jobs.digest", "redis": "redis://:***@rq:6379/0"}}
    found = warnings(check_file(str(path)), 0)
    assert any("jobs.d.rq.redis: a password written in the file" in w for w in found)
