"""A worker run in a thread of the test's process, and the starts its runs note
(:mod:`tests.support.server_time`): for tests of the claim loop's timing."""

from __future__ import annotations

import json
import threading
from typing import Any

import redis

from cronsvc.worker.worker import Worker
from tests.support.wait import wait_for


def in_thread(worker: Worker) -> threading.Thread:
    """``worker`` running in a daemon thread of its own."""
    thread = threading.Thread(target=worker.run_forever, daemon=True)
    thread.start()
    return thread


def stopped(worker: Worker, thread: threading.Thread, hard: bool = True) -> None:
    """Stop ``worker`` (``hard``: its runs given back now) and wait for its thread."""
    worker.stop()
    if hard:
        worker.stop()
    wait_for(lambda: not thread.is_alive(), timeout=30, message="the worker to stop")


def notes(r: redis.Redis, key: str) -> dict[str, dict[str, Any]]:
    """The starts noted on the list ``key``, by fire."""
    return {n["fire"]: n for n in map(json.loads, r.lrange(key, 0, -1))}
