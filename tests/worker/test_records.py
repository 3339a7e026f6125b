"""What a run leaves behind (cronsvc.worker.records): the history record's JSON as the
results thread writes it, without the record, is the record's own JSON."""

from __future__ import annotations

import json

import pytest

from cronsvc.clock import iso_utc
from cronsvc.history import Cancel, encoded_plain, encoded_run
from cronsvc.run.outcome import Outcome
from cronsvc.store.replies import record_json
from cronsvc.store.scripts import Claim
from cronsvc.worker.records import (
    RUN_LINE,
    _args,
    _scheduled,
    history_json,
    history_record,
    ok_line,
)

CLAIM = Claim(fire_id="backup@1700000000000", job="backup", token=2, due_ms=1_700_000_000_000)


@pytest.mark.parametrize(("claim", "outcome", "status"), [
    (CLAIM, Outcome("ok", 1_700_000_000_004, 12), "ok"),
    (CLAIM, Outcome("ok", 1_700_000_000_004, 0, exit_code=0, output="done\n"), "ok"),
    (CLAIM, Outcome("cancelled", 1_700_000_000_004, 3, error="cancelled"), Cancel.REPLACED),
    (CLAIM, Outcome("cancelled", 1_700_000_000_004, 3), Cancel.REPLACED),
    (Claim("ünï@5", "ünï\u2028", 1, 5), Outcome("ok", 9, 0, exit_code=None), "ok"),
    (CLAIM, Outcome("failed", 1_700_000_000_004, 7, exit_code=-9, output="é€😀\"\\\n" * 200,
                    error='exit "3"\u2028'), "failed"),
    (Claim("ünï@5!s-1", "ünï", 1, 5), Outcome("timeout", -4, 1, error="timed out"), "timeout"),
    # values of other types than a run's: the record's way, the same bytes
    (CLAIM, Outcome("ok", 1.5, 12), "ok"),  # type: ignore[arg-type]
    (CLAIM, Outcome("ok", 1_700_000_000_004, True), "ok"),  # type: ignore[arg-type]
    (Claim("a@1", "a", 1, 1), Outcome("ok", 1, 1, output=b"raw"), "ok"),  # type: ignore[arg-type]
])
def test_a_run_s_record_is_written_as_its_record_is(claim: Claim, outcome: Outcome,
                                                     status: str) -> None:
    expected = record_json(history_record(claim, outcome, "w-1@host:42", 3, status=status))
    assert history_json(claim, outcome, "w-1@host:42", 3, status) == expected
    assert json.loads(expected)["status"] == status


@pytest.mark.parametrize("ms", [0, 1, 999, 1_700_000_000_000, 1_700_000_000_007,
                                -5, 221_845_392_000_000, 253_402_300_799_999])
def test_a_due_time_s_text_is_its_iso_time_each_time(ms: int) -> None:
    assert _scheduled(ms) == iso_utc(ms) and _scheduled(ms) == iso_utc(ms)


@pytest.mark.parametrize(("outcome", "plain"), [
    (Outcome("ok", 1_700_000_000_004, 12), True),
    (Outcome("ok", 1_700_000_000_004, 12, exit_code=0), True),
    (Outcome("ok", 1_700_000_000_004, 12, output="said"), True),
    (Outcome("ok", 1_700_000_000_004, 12, exit_code=3), False),
    (Outcome("ok", 1_700_000_000_004, 12, error="why"), False),
    (Outcome("failed", 1_700_000_000_004, 12), False),
    (Outcome("cancelled", 1_700_000_000_004, 12), False),
])
def test_the_short_line_of_a_success_is_its_run_line(outcome: Outcome, plain: bool) -> None:
    line = ok_line(CLAIM, outcome, 4)
    assert (line is not None) is plain
    if line is not None:
        assert line == RUN_LINE % _args(CLAIM, outcome, 4, "")


@pytest.mark.parametrize("text", ["backup", "café \"quoted\" \\ line\n", "\u2603"])
def test_the_short_way_of_a_plain_run_writes_what_encoded_run_writes(text: str) -> None:
    assert encoded_plain(f"{text}@1", text, "ok", 1, 2, 3, 4, text) == encoded_run(
        f"{text}@1", text, "ok", None, 1, 2, 3, 4, text, None, None)
    with pytest.raises(TypeError):
        encoded_plain(b"x@1", "x", "ok", 1, 2, 3, 4, "w")  # type: ignore[arg-type]
