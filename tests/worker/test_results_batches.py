"""How the results thread gathers what it records: runs and notes in batches, at most
RESULT_BATCH, waiting while its worker claims (until a run frees a slot or the end)."""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path

import pytest
import redis

from cronsvc.config.models import Config, load_config
from cronsvc.fires import fire_id, parse_fire
from cronsvc.history import Cancel
from cronsvc.keys import Keys
from cronsvc.process.logs import batched_lines, setup_logging
from cronsvc.run.outcome import Outcome
from cronsvc.store.connection import connect
from cronsvc.store.replies import record_json
from cronsvc.store.scripts import Claim
from cronsvc.worker.records import RUN_LINE, _args, history_record, ok_line, run_fields
from cronsvc.worker.results import DEFER_STEP, DEFER_STEP_PLAIN, RESULT_BATCH
from cronsvc.worker.running import Note, Running
from cronsvc.worker.worker import Worker

K = Keys()
OK = Outcome("ok", 1_700_000_000_004, 1)


@pytest.fixture
def worker(tmp_path: Path, redis_url: str) -> Worker:
    cfg = tmp_path / "jobs.yaml"
    cfg.write_text("jobs:\n"
                   "  free:\n    cron: '0 0 1 1 *'\n    command: [true]\n"
                   "  bound:\n    cron: '0 0 1 1 *'\n    command: [true]\n"
                   "    max_concurrent: 1\n")
    return Worker(load_config(cfg), connect(redis_url), worker_id="w")


def run_of(config: Config, job: str, n: int) -> tuple[Running, Outcome]:
    claim = Claim(f"{job}@{n}", job, 1, n)
    return Running(claim=claim, job=config.jobs[job], keys=K), OK


def test_a_batch_takes_what_is_queued_up_to_its_size(worker: Worker) -> None:
    results = worker.results
    note = Note(K, "free", {"fire": "free@0"})  # type: ignore[typeddict-item]
    runs = [run_of(worker.config, "free", n) for n in range(RESULT_BATCH + 3)]
    results._queue.put(note)
    for run in runs[1:]:
        results._queue.put(run)
    batch: list[tuple[Running, Outcome]] = []
    notes: list[Note] = []
    assert results._take(runs[0], batch, notes) is False
    assert notes == [note] and batch == runs[:RESULT_BATCH - 1]
    assert results._queue.qsize() == 4  # the rest: the next batch's
    batch, notes = [], []
    results._queue.put(None)
    assert results._take(results._queue.get(), batch, notes) is True  # and the end mark
    assert batch == runs[RESULT_BATCH - 1:] and not notes


def test_waiting_while_claiming_ends_at_a_run_that_frees_a_slot_or_the_end(
        worker: Worker) -> None:
    results, config = worker.results, worker.config
    worker.claiming = True
    first, bound, after = (run_of(config, "free", 1), run_of(config, "bound", 2),
                           run_of(config, "free", 3))
    for item in (bound, after):
        results._queue.put(item)
    batch = [first]
    assert results._defer(batch, []) is False
    assert batch == [first, bound] and results._queue.get_nowait() == after
    results._queue.put(after)
    results._queue.put(None)
    batch = [first]
    assert results._defer(batch, []) is True
    assert batch == [first, after]
    worker.claiming = False  # not claiming: no wait at all
    results._queue.put(after)
    assert results._defer(batch, []) is False and results._queue.qsize() == 1


def test_the_wait_looks_often_only_while_a_run_that_ends_it_may_come(
        worker: Worker, tmp_path: Path) -> None:
    results, config = worker.results, worker.config
    assert results._step() == DEFER_STEP  # a job holds slots others wait for
    plain = tmp_path / "plain.yaml"
    plain.write_text("jobs:\n  free:\n    cron: '0 0 1 1 *'\n    command: [true]\n")
    worker.config = load_config(plain)
    assert results._step() == DEFER_STEP_PLAIN > DEFER_STEP
    run, outcome = run_of(config, "free", 1)
    run.on_loop = True
    assert results._frees_slots([(run, outcome)])
    assert results._step() == DEFER_STEP  # runs on the loop come: their end ends it


@pytest.mark.timeout(30)
def test_a_full_batch_is_not_held_while_claiming(worker: Worker,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    results, config = worker.results, worker.config
    monkeypatch.setattr("cronsvc.worker.results.DEFER_AT_MOST", 3600.0)
    worker.claiming = True  # for good: only a full batch ends the wait
    runs = [run_of(config, "free", n) for n in range(RESULT_BATCH + 2)]
    for run in runs[1:]:
        results._queue.put(run)
    batch = [runs[0]]
    assert results._defer(batch, []) is False
    assert batch == runs[:RESULT_BATCH] and results._queue.qsize() == 2
    assert results._defer(batch, []) is False  # full already: no wait, nothing taken
    assert results._queue.qsize() == 2


def test_without_bounded_jobs_a_run_on_the_loop_still_ends_the_wait(
        worker: Worker, tmp_path: Path) -> None:
    results, bounded_config = worker.results, worker.config
    plain = tmp_path / "plain.yaml"
    plain.write_text("jobs:\n  free:\n    cron: '0 0 1 1 *'\n    command: [true]\n")
    worker.config = load_config(plain)
    worker.claiming = True
    first, after = run_of(worker.config, "free", 1), run_of(worker.config, "free", 3)
    on_loop = run_of(worker.config, "free", 2)
    on_loop[0].on_loop = True
    assert not results._frees_slots([first])
    for item in (on_loop, after):
        results._queue.put(item)
    batch = [first]
    assert results._defer(batch, []) is False
    assert batch == [first, on_loop] and results._queue.get_nowait() == after
    # the config reloaded with a bounded job: its runs end the wait again
    worker.config = bounded_config
    bound = run_of(bounded_config, "bound", 4)
    assert results._frees_slots([bound])
    results._loop_runs = False
    for item in (bound, after):
        results._queue.put(item)
    batch = [first]
    assert results._defer(batch, []) is False
    assert batch == [first, bound] and results._queue.get_nowait() == after


@pytest.mark.parametrize("fmt", ["human", "json"])
def test_a_batch_s_records_and_lines_are_each_run_s_own(
        fmt: str, tmp_path: Path, redis_url: str, r: redis.Redis,
        capsys: pytest.CaptureFixture[str]) -> None:
    # Plain successes of two history caps (an ack each) and an ack that also holds a
    # success that kept output, a replaced run, a one-off, a runtime schedule's fire and a
    # start that is not an int: every record is the record's own JSON, every line the
    # run's own line with the run's fields, one ack's lines after another's.
    cfg = tmp_path / "jobs.yaml"
    cfg.write_text("jobs:\n"
                   "  a:\n    cron: '0 0 1 1 *'\n    call: bench.jobs:noop\n"
                   "  b:\n    cron: '0 0 1 1 *'\n    call: bench.jobs:noop\n    history: 50\n"
                   "  c:\n    cron: '0 0 1 1 *'\n    call: bench.jobs:noop\n    history: 9\n")
    worker = Worker(load_config(cfg), connect(redis_url), worker_id="w-1")
    config, t0 = worker.config, int(time.time()) * 1000
    plain = Outcome("ok", t0 + 7, 2)

    def item(fid: str, outcome: Outcome, token: int = 1) -> tuple[Running, Outcome]:
        job, due = parse_fire(fid)[:2]
        return (Running(claim=Claim(fid, job, token, due), job=config.jobs[job], keys=K),
                outcome)

    items = [item(fire_id("ab"[n % 2], t0 + n * 1000), plain, n % 3 + 1) for n in range(12)]
    items += [item(fire_id("c", t0 + 99_000), Outcome("ok", t0, 1, output="said\n")),
              item(fire_id("c", t0 + 98_000), Outcome("cancelled", t0, 1, error="replaced")),
              item(fire_id("c", t0, "tq"), plain),
              item(fire_id("c", t0 + 97_000, schedule="s-1"), plain),
              item(fire_id("c", t0 + 96_000), Outcome("ok", float(t0), 1))]  # type: ignore[arg-type]
    items[13][0].cancel_reason = Cancel.REPLACED
    for run, _ in items:
        r.zadd(K.working, {run.claim.fire_id: t0 + 600_000})
        r.hset(K.attempts, run.claim.fire_id, run.claim.token)
        worker._running.add(run)
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    setup_logging(fmt, "w-1")
    try:
        with batched_lines():
            worker.results._record_batch(items)
    finally:
        root.handlers[:] = handlers
        root.setLevel(level)

    assert not worker._running and r.zcard(K.working) == 0
    for job in ("a", "b", "c"):
        expected = [record_json(history_record(
            run.claim, outcome, "w-1", worker.offset_ms,
            status=Cancel.REPLACED if outcome.status == "cancelled" else outcome.status))
            for run, outcome in items if run.claim.job == job]
        assert sorted(r.lrange(K.history(job), 0, -1)) == sorted(expected)
    lines = capsys.readouterr().err.splitlines()
    said = [json.loads(line) for line in lines] if fmt == "json" else lines
    in_acks = sorted(items, key=lambda i: i[0].claim.job)  # an ack per job (cap), in turn
    for (run, outcome), line in zip(in_acks, said, strict=True):
        # (no run starts before its due time: a start estimated before it is at it)
        lag = max(int(outcome.started_ms) + worker.offset_ms - run.claim.due_ms, 0)
        told = ok_line(run.claim, outcome, lag) or RUN_LINE % _args(run.claim, outcome, lag, "")
        if fmt == "json":
            assert line["msg"] == told
            assert {k: line[k] for k in ("job", "fire", "attempt", "worker")} == run_fields(
                run.claim, "w-1")
        else:
            assert line.endswith(" " + told), (line, told)
