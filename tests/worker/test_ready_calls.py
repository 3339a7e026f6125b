"""Untimed sync calls no hook wants run in one frame (``Worker._run_ready``), from what
their job's traits resolved ahead: the same outcome as the full path (``execute``), and
the full path's checks (a cancel, a lease that may have lapsed) still made."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import redis

from cronsvc.client.client import Client
from cronsvc.clock import monotonic
from cronsvc.config.models import load_config
from cronsvc.keys import Keys
from cronsvc.kinds.call import Ready
from cronsvc.run.context import current
from cronsvc.run.outcome import Outcome
from cronsvc.store.connection import connect
from cronsvc.store.scripts import Claim, Scripts
from cronsvc.worker.running import Running
from cronsvc.worker.worker import Worker

K = Keys()

JOBS = """\
jobs:
  nothing: {cron: '0 0 1 1 *', call: 'tests.support.calls:nothing'}
  add: {cron: '0 0 1 1 *', call: 'tests.support.calls:add', args: [1, 2], kwargs: {scale: 3}}
  ctx: {cron: '0 0 1 1 *', call: 'tests.support.calls:with_ctx', kwargs: {suffix: s}}
  current: {cron: '0 0 1 1 *', call: 'tests.support.calls:from_current'}
  loud: {cron: '0 0 1 1 *', call: 'tests.support.calls:loud', args: [60], output: 256}
  big: {cron: '0 0 1 1 *', call: 'tests.support.calls:big'}
  boom: {cron: '0 0 1 1 *', call: 'tests.support.calls:boom'}
  cancel_self: {cron: '0 0 1 1 *', call: 'tests.support.calls:cancel_self'}
  timed: {cron: '0 0 1 1 *', call: 'tests.support.calls:nothing', timeout: 10}
  async: {cron: '0 0 1 1 *', call: 'tests.support.async_calls:returns'}
  missing: {cron: '0 0 1 1 *', call: 'tests.support.calls:not_there'}
  pinged: {cron: '0 0 1 1 *', call: 'tests.support.calls:nothing', ping: 'http://127.0.0.1:9/p'}
  command: {cron: '0 0 1 1 *', command: ['true']}
"""


def _worker(tmp_path: Path, redis_url: str, text: str = JOBS) -> Worker:
    cfg = tmp_path / "jobs.yaml"
    cfg.write_text(text)
    return Worker(load_config(cfg), connect(redis_url), worker_id="w")


def _started(worker: Worker, claims: list[Claim], claimed_at: float
             ) -> list[tuple[Callable[..., Any], tuple[Any, ...]]]:
    """The slots' tasks of these claims, as the claim loop starts them (not run)."""
    tasks: list[tuple[Callable[..., Any], tuple[Any, ...]]] = []
    worker._pool.submit_many = (  # type: ignore[method-assign]
        lambda fn, each: tasks.extend((fn, args) for args in each))
    worker._start(K, claims, claimed_at)
    return tasks


def _ended(worker: Worker) -> list[tuple[Running, Outcome]]:
    queued = worker.results._queue
    out = []
    while not queued.empty():
        item = queued.get_nowait()
        assert isinstance(item, tuple)
        out.append(item)
    return out


def _shown(outcome: Outcome) -> tuple[Any, ...]:
    """An outcome but for its times."""
    return (outcome.status, outcome.exit_code, outcome.output, outcome.error)


@pytest.mark.parametrize(
    "job", ["nothing", "add", "ctx", "current", "loud", "big", "boom", "cancel_self"])
def test_a_ready_call_ends_as_the_full_path_ends_it(
        tmp_path: Path, redis_url: str, job: str) -> None:
    worker = _worker(tmp_path, redis_url)
    [(fn, (run, fast))] = _started(worker, [Claim(f"{job}@1", job, 1, 1000)], monotonic())
    assert isinstance(fast, Ready)
    fn(run, fast)
    [(done, ready)] = _ended(worker)
    assert done is run and not run.cancel.is_set() or job == "cancel_self"

    [(fn, (again, _))] = _started(worker, [Claim(f"{job}@2", job, 1, 2000)], monotonic())
    fn(again)  # without what it calls: the full path (execute)
    [(_, full)] = _ended(worker)

    assert type(ready) is Outcome
    assert _shown(ready) == _shown(full).__class__(
        x.replace(f"{job}@2", f"{job}@1") if isinstance(x, str) else x for x in _shown(full))
    assert ready.status == {"boom": "failed", "cancel_self": "cancelled"}.get(job, "ok")
    assert worker._busy_n == 0


def test_only_untimed_sync_calls_no_hook_wants_are_ready(tmp_path: Path, redis_url: str
                                                         ) -> None:
    worker = _worker(tmp_path, redis_url)
    ready = {name: worker._traits_of(job)[4] for name, job in worker.config.jobs.items()}
    assert {name for name, fast in ready.items() if fast is not None} == {
        "nothing", "add", "ctx", "current", "loud", "big", "boom", "cancel_self"}
    assert ready["add"] is not None and ready["add"].args == (1, 2)
    assert ready["loud"] is not None and ready["loud"].output == 256


def test_a_ready_call_cancelled_before_its_start_is_not_called(
        tmp_path: Path, redis_url: str) -> None:
    worker = _worker(tmp_path, redis_url, JOBS.replace(
        "calls:nothing'}", f"calls:touch', args: ['{tmp_path / 'ran'}']}}", 1))
    [(fn, (run, fast))] = _started(worker, [Claim("nothing@1", "nothing", 1, 1000)], monotonic())
    assert fast is not None
    run.cancel.set()
    fn(run, fast)
    [(_, outcome)] = _ended(worker)
    assert (outcome.status, outcome.error) == ("cancelled", "cancelled before start")
    assert not (tmp_path / "ran").exists()


@pytest.mark.parametrize("taken_over", [True, False])
def test_a_ready_call_claimed_long_ago_runs_only_if_still_held(
        tmp_path: Path, redis_url: str, r: redis.Redis, taken_over: bool) -> None:
    marker = tmp_path / "ran"
    cfg = tmp_path / "jobs.yaml"
    cfg.write_text("jobs:\n  mark:\n    cron: '0 0 1 1 *'\n"
                   f"    call: 'tests.support.calls:touch'\n    args: ['{marker}']\n")
    Client(redis_url, config=str(cfg)).publish_config()
    fid = Client(redis_url, config=str(cfg)).trigger("mark")
    a = Worker(load_config(cfg), connect(redis_url), worker_id="a", lease=5)
    [claim] = a.scripts.claim(K, "a", batch=1, lease_ms=5000).claimed
    if taken_over:  # its lease lapsed (Redis away) and worker b took the fire over
        r.zadd(K.working, {fid: 0})
        [second] = Scripts(r).claim(K, "b", batch=1, lease_ms=60_000).claimed
        assert (second.fire_id, second.token) == (fid, 2)

    [(fn, (run, fast))] = _started(a, [claim], monotonic() - 3600)
    assert fast is not None
    fn(run, fast)
    a.results.close()

    assert marker.exists() is not taken_over
    history = r.lrange(K.history("mark"), 0, -1)
    assert len(history) == (0 if taken_over else 1)
    assert not a._running


@pytest.mark.parametrize("target", ["current_twice", "ctx_is_current"])
def test_a_ready_call_makes_its_context_once_asked_the_one_the_full_path_gives(
        tmp_path: Path, redis_url: str, target: str) -> None:
    # A run that neither takes ctx nor asks current() makes no context; one that asks
    # gets the one _context makes, the same object each time it asks.
    worker = _worker(tmp_path, redis_url, f"jobs:\n  j: {{cron: '0 0 1 1 *', "
                     f"call: 'tests.support.calls:{target}'}}\n")
    claim = Claim("j@1", "j", 2, 1000, False, {"k": 1})
    [(fn, (run, fast))] = _started(worker, [claim], monotonic())
    assert fast is not None and fast.takes_ctx is (target == "ctx_is_current")
    fn(run, fast)
    [(_, outcome)] = _ended(worker)
    assert (outcome.status, outcome.error) == ("ok", None)
    assert outcome.output == json.dumps(repr(worker._context(run)))
    assert current() is None


def test_a_ready_call_that_does_not_ask_makes_no_context(tmp_path: Path, redis_url: str
                                                        ) -> None:
    worker = _worker(tmp_path, redis_url)
    made: list[Running] = []
    context = worker._context
    worker._context = lambda run: made.append(run) or context(run)  # type: ignore[method-assign]
    [(fn, (run, fast))] = _started(worker, [Claim("nothing@1", "nothing", 1, 1000)],
                                   monotonic())
    fn(run, fast)
    [(_, outcome)] = _ended(worker)
    assert outcome.status == "ok" and made == [] and run.context is None
    [(fn, (run, fast))] = _started(worker, [Claim("current@1", "current", 1, 1000)],
                                   monotonic())
    fn(run, fast)
    assert made == [run] and run.context is not None
