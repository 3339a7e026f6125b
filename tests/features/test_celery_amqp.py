"""Celery on RabbitMQ (AMQP), with a private node of Debian's rabbitmq-server: the app the
``celery`` kind sends with has the broker confirm each message (publisher confirms), and
an every-second job's fires arrive once each, their outcomes in cronsvc's history."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import redis
from amqp.exceptions import NotFound
from celery import Celery

from cronsvc.kinds.celery import CeleryTarget, _app
from cronsvc.testing import Fleet, history
from tests.support.queues import celery_worker, read_runs
from tests.support.rabbitmq import RabbitNode
from tests.support.wait import wait_for

pytestmark = pytest.mark.slow


def publish_to_nowhere(app: Any) -> None:
    """Publish one message to an exchange that does not exist, which RabbitMQ refuses."""
    with app.connection_for_write() as conn:
        conn.Producer().publish({"x": 1}, exchange="no-such-exchange", routing_key="x",
                                declare=[], retry=False)


def test_the_kinds_app_waits_for_the_broker_to_confirm_each_message(
        rabbitmq: RabbitNode) -> None:
    app = _app(CeleryTarget(task="tests.digest", broker=rabbitmq.url))
    assert app.conf.broker_transport_options["confirm_publish"] is True
    # With confirms the send waits for the broker's word, so a refused message raises;
    # without them (Celery's default) it is gone without a word.
    with pytest.raises(NotFound):
        publish_to_nowhere(app)
    publish_to_nowhere(Celery("plain", broker=rabbitmq.url))
    users = _app(CeleryTarget(task="tests.digest", app="tests.support.celery_app:app"))
    assert users.conf.broker_transport_options["confirm_publish"] is True


def test_every_second_fires_each_run_once_on_amqp(
        tmp_path: Path, redis_url: str, r: redis.Redis, rabbitmq: RabbitNode) -> None:
    ledger = tmp_path / "runs.jsonl"
    fleet = Fleet(tmp_path, redis_url, {"digest": {
        "every": "1s", "timeout": "30s",
        "celery": {"task": "tests.digest", "broker": rabbitmq.url, "args": ["amqp"],
                   "kwargs": {"size": 5}}}})
    with celery_worker(tmp_path, rabbitmq.url, redis_url, ledger), fleet.running("w1", "w2"):
        wait_for(lambda: len([h for h in history(r, "digest") if h["status"] == "ok"]) >= 8,
                 timeout=60, message="eight fires of digest recorded ok")
    runs = read_runs(ledger)
    assert all(run["team"] == "amqp" and run["size"] == 5 for run in runs)
    assert all(run["task_id"] == run["fire"] for run in runs)
    assert max(Counter(run["fire"] for run in runs).values()) == 1
    ok = [h for h in history(r, "digest") if h["status"] == "ok"]
    assert {h["fire"] for h in ok} <= {run["fire"] for run in runs}
    assert all("digest for amqp" in h["output"] for h in ok)
