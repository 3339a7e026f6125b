"""Run lines: readable by default, JSON with the run's fields for log shippers."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator

import pytest

from cronsvc.process.logs import batched_lines, setup_logging
from cronsvc.run.outcome import Outcome
from cronsvc.store.scripts import Claim
from cronsvc.worker.records import log_outcome

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
