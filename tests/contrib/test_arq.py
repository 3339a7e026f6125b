"""The arq wrapper, called as arq calls a function, on a real Redis: the delivery's keyword
argument is taken off, the function runs once per delivery, and its outcome is reported."""

from __future__ import annotations

import asyncio
from typing import Any

import redis

import cronsvc
from cronsvc.contrib.arq import SKIPPED_RESULT, guarded
from cronsvc.keys import Keys
from cronsvc.run.dispatch import FIELD, KEEP_MS, Delivery
from cronsvc.store.scripts import Scripts


def test_a_delivery_runs_once_without_its_argument_and_reports_ok(
        redis_url: str, r: redis.Redis) -> None:
    seen: list[tuple[Any, ...]] = []

    @guarded(url=redis_url)
    async def digest(ctx: dict[str, Any], team: str, size: int = 0) -> str:
        fire = cronsvc.current()
        seen.append((ctx["job_id"], team, size, fire and fire.fire_id))
        return f"digest for {team}"

    fire = "digest@1000"
    delivery = Delivery(fire, "digest", 1000, 1, Keys().deliveries(fire), payload={"a": 1})
    Scripts(redis.Redis.from_url(redis_url)).dispatch(delivery.key, "begin", 1, KEEP_MS)
    sent = {FIELD: delivery.as_dict()}
    first = asyncio.run(digest({"job_id": fire}, "core", size=3, **sent))
    again = asyncio.run(digest({"job_id": fire}, "core", size=3, **sent))
    assert (digest.__name__, first, again) == ("digest", "digest for core", SKIPPED_RESULT)
    assert seen == [(fire, "core", 3, fire)]
    states = [fields["state"] for _id, fields in r.xrange(delivery.key)]
    assert states == ["sending", "started", "ok"]


def test_a_job_cronsvc_did_not_send_runs_as_it_is(redis_url: str) -> None:
    @guarded(url=redis_url)
    async def digest(ctx: dict[str, Any], team: str) -> str:
        return f"{team}: {cronsvc.current()}"

    assert asyncio.run(digest({}, "core")) == "core: None"
