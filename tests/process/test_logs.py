"""Run lines: readable by default, JSON with the run's fields for log shippers."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterator

import pytest

from cronsvc.process.logs import batched_lines, line_writer, setup_logging
from cronsvc.run.capture import install
from cronsvc.run.outcome import Outcome
from cronsvc.run.output import Kept
from cronsvc.run.within import RUN, InRun
from cronsvc.store.scripts import Claim
from cronsvc.worker.records import log_outcome, run_fields

CLAIM = Claim(fire_id="backup@1700000000000", job="backup", token=2, due_ms=1_700_000_000_000)
OK = Outcome("ok", started_ms=1_700_000_000_004, duration_ms=12)
FAILED = Outcome("failed", started_ms=1_700_000_000_004, duration_ms=12, exit_code=3,
                 error="exit code 3")


@pytest.fixture(autouse=True)
def restore_root_logger() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


def test_json_run_lines_carry_job_fire_attempt_and_worker(
    capsys: pytest.CaptureFixture[str],
) -> None:
    setup_logging("json", "worker-1")
    log = logging.getLogger("cronsvc.worker")
    log_outcome(log, "worker-1@host:42", CLAIM, OK, 4)
    log_outcome(log, "worker-1@host:42", CLAIM, FAILED, 4, note="retry")
    lines = [json.loads(line) for line in capsys.readouterr().err.splitlines()]
    assert [(x["level"], x["job"], x["fire"], x["attempt"], x["worker"]) for x in lines] == [
        ("info", "backup", "backup@1700000000000", 2, "worker-1@host:42"),
        ("warning", "backup", "backup@1700000000000", 2, "worker-1@host:42"),
    ]
    assert lines[0]["msg"].startswith("ok backup@1700000000000 attempt=2 ")
    assert "lag=4ms took=12ms" in lines[0]["msg"]
    assert "exit=3 error='exit code 3' (retry)" in lines[1]["msg"]
    assert lines[0]["ts"].endswith("Z")


def test_human_run_lines_name_the_process_and_the_fire(
    capsys: pytest.CaptureFixture[str],
) -> None:
    setup_logging("human", "worker-1")
    log_outcome(logging.getLogger("cronsvc.worker"), "w", CLAIM, OK, 4)
    [line] = capsys.readouterr().err.splitlines()
    assert " worker-1 INFO ok backup@1700000000000 attempt=2 scheduled=2023-11-14T22:13:20" \
        in line


def test_batched_lines_are_written_at_the_end_of_the_block_in_order(
    capsys: pytest.CaptureFixture[str],
) -> None:
    setup_logging("human", "worker-1")
    log = logging.getLogger("cronsvc.worker")
    with batched_lines():
        log.info("one")
        log.info("two")
        assert capsys.readouterr().err == ""  # held
        log.warning("three")  # a warning is not held, and the lines before it go first
        assert [line.split(" ", 3)[3] for line in capsys.readouterr().err.splitlines()] == [
            "one", "two", "three"]
        log.info("four")
        assert capsys.readouterr().err == ""
    assert capsys.readouterr().err.endswith(" worker-1 INFO four\n")
    log.info("five")  # outside a block: at once
    assert capsys.readouterr().err.endswith(" worker-1 INFO five\n")


@pytest.mark.parametrize("fmt", ["human", "json"])
@pytest.mark.parametrize("outcome", [
    OK, FAILED, Outcome("ok", 1_700_000_000_004, 0, exit_code=0),
    Outcome("ok", 1_700_000_000_004, 3, exit_code=2), Outcome("ok", 1_699_999_999_000, 3,
                                                              error="ok, said 'why'"),
])
@pytest.mark.parametrize("note", ["retry", ""])
def test_a_run_line_written_without_logging_is_logging_s_line(
    fmt: str, outcome: Outcome, note: str, capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    setup_logging(fmt, "worker-1")
    log = logging.getLogger("cronsvc.worker")
    written = []
    for now in (1_700_000_000.0, 1_700_000_000.999, 1_700_000_001.5):
        monkeypatch.setattr(time, "time", lambda now=now: now)  # the lines' time
        for fast in (False, True):
            with batched_lines():
                write = line_writer(log, logging.INFO) if fast else None
                assert (write is not None) is fast
                log_outcome(log, "worker-1@host:42", CLAIM, outcome, -4, note=note,
                            write=write)
            written.append(capsys.readouterr().err)
    assert written[0] and written[0].endswith("\n")
    assert written[0::2] == written[1::2]  # the same line, at each time
    assert len(set(written)) == (3 if fmt == "json" else 2)  # the human line: to the second


@pytest.mark.parametrize("fmt", ["human", "json"])
def test_run_lines_written_at_once_are_the_lines_written_one_by_one(
    fmt: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
) -> None:
    setup_logging(fmt, "worker-1")
    log = logging.getLogger("cronsvc.worker")
    monkeypatch.setattr(time, "time", lambda: 1_700_000_000.25)
    claims = [CLAIM._replace(fire_id=f"backup@{n}", token=n) for n in range(1, 4)]
    msgs = [f"ok {c.fire_id}" for c in claims]
    fields = [run_fields(c, "w") for c in claims]
    written = []
    for at_once in (False, True):
        with batched_lines():
            write = line_writer(log, logging.INFO)
            assert write is not None and write.plain is (fmt == "human")
            if at_once:
                write.lines(msgs, None if write.plain else fields)
                write.lines([], None)  # nothing
            else:
                for msg, f in zip(msgs, fields, strict=True):
                    write(msg, f)
        written.append(capsys.readouterr().err)
    assert written[0].count("\n") == 3 and written[0] == written[1]
    if fmt == "json":
        with batched_lines():
            write = line_writer(log, logging.INFO)
            assert write is not None
            with pytest.raises(ValueError, match="fields"):
                write.lines(msgs)


def test_run_lines_go_through_logging_when_a_user_s_handler_is_there(
    capsys: pytest.CaptureFixture[str],
) -> None:
    setup_logging("human", "worker-1")
    log = logging.getLogger("cronsvc.worker")
    seen: list[logging.LogRecord] = []
    mine = logging.Handler()
    mine.emit = seen.append  # type: ignore[method-assign]
    try:
        for where in (log, logging.getLogger("cronsvc"), logging.getLogger()):
            where.addHandler(mine)
            with batched_lines():
                write = line_writer(log, logging.INFO)
                assert write is None
                log_outcome(log, "w", CLAIM, OK, 4, write=write)
            where.removeHandler(mine)
            assert seen.pop().getMessage().startswith("ok backup@1700000000000 attempt=2 ")
            assert " worker-1 INFO ok backup@1700000000000 " in capsys.readouterr().err
    finally:
        logging.disable(logging.NOTSET)


@pytest.mark.parametrize("change", ["handler filter", "logger filter", "handler level",
                                    "disabled", "another formatter", "not batched"])
def test_anything_else_than_cronsvc_s_own_set_up_takes_logging_s_way(change: str) -> None:
    setup_logging("human", "worker-1")
    log, handler = logging.getLogger("cronsvc.worker"), logging.getLogger().handlers[0]
    with batched_lines():
        assert line_writer(log, logging.INFO) is not None
    try:
        if change == "handler filter":
            handler.addFilter(logging.Filter("elsewhere"))
        elif change == "logger filter":
            log.addFilter(logging.Filter("elsewhere"))
        elif change == "handler level":
            handler.setLevel(logging.WARNING)
        elif change == "disabled":
            logging.disable(logging.INFO)
        elif change == "another formatter":
            handler.setFormatter(logging.Formatter("%(message)s"))
        if change == "not batched":
            assert line_writer(log, logging.INFO) is None
        else:
            with batched_lines():
                assert line_writer(log, logging.INFO) is None
    finally:
        logging.disable(logging.NOTSET)
        log.filters.clear()


def test_inside_a_run_the_worker_s_lines_are_not_written_fast() -> None:
    setup_logging("human", "worker-1")
    token = RUN.set(InRun(None, None, Kept()))
    try:
        with batched_lines():
            assert line_writer(logging.getLogger("cronsvc.worker"), logging.INFO) is None
    finally:
        RUN.reset(token)


def test_the_handler_of_runs_records_does_not_stop_the_fast_way() -> None:
    setup_logging("human", "worker-1")
    install()  # as a worker running call jobs has it: a handler that takes runs' records
    root = logging.getLogger()
    assert len(root.handlers) == 2
    with batched_lines():
        assert line_writer(logging.getLogger("cronsvc.worker"), logging.INFO) is not None
    root.handlers[1].addFilter(logging.Filter("x"))  # not as made: logging's way
    try:
        with batched_lines():
            assert line_writer(logging.getLogger("cronsvc.worker"), logging.INFO) is None
    finally:
        root.handlers[1].filters.clear()


def test_a_fast_line_that_cannot_be_written_goes_through_logging(
    capsys: pytest.CaptureFixture[str],
) -> None:
    setup_logging("human", "worker-1")

    def broken(msg: str, fields: dict[str, object]) -> None:
        raise ValueError("no")

    log_outcome(logging.getLogger("cronsvc.worker"), "w", CLAIM, OK, 4, write=broken)
    assert " worker-1 INFO ok backup@1700000000000 attempt=2 " in capsys.readouterr().err
