"""Frozen dataclasses made per fire without their ``__init__``: the same instances."""

from __future__ import annotations

import dataclasses

import pytest

from cronsvc.kinds import outcome_of
from cronsvc.run.context import FireContext
from cronsvc.run.made import made
from cronsvc.run.outcome import Outcome, Result
from cronsvc.run.output import Kept


def test_made_is_what_init_makes_and_stays_frozen() -> None:
    fields = dict(job="j", fire_id="j:1", scheduled_ms=5, attempt=2, worker="w",
                  payload={"a": 1}, schedule=None, trace=None)
    ctx = made(FireContext, **fields)
    assert ctx == FireContext(**fields)  # type: ignore[arg-type]
    assert dataclasses.replace(ctx, attempt=3).attempt == 3
    with pytest.raises(dataclasses.FrozenInstanceError):
        ctx.attempt = 3  # type: ignore[misc]


def test_made_wants_every_field() -> None:
    with pytest.raises(TypeError, match="missing {'error'}"):
        made(Outcome, status="ok", started_ms=1, duration_ms=2, exit_code=None, output="")


def test_an_outcome_of_a_result_is_the_outcome_init_makes() -> None:
    result = Result("failed", exit_code=3, output="out", error="exit code 3")
    outcome = outcome_of(result, 5, 7)
    assert outcome == Outcome("failed", 5, 7, 3, "out", "exit code 3")
    assert vars(outcome) == vars(Outcome("failed", 5, 7, 3, "out", "exit code 3"))
    with pytest.raises(dataclasses.FrozenInstanceError):
        outcome.status = "ok"  # type: ignore[misc]
    # Most calls: no exit code, output or error.
    plain = outcome_of(Result("ok"), 5, 7)
    assert plain == Outcome("ok", 5, 7)
    assert vars(plain) == vars(Outcome("ok", 5, 7))  # every field in the instance
    assert list(vars(plain)) == [f.name for f in dataclasses.fields(Outcome)]
    assert repr(plain) == repr(Outcome("ok", 5, 7))


def test_a_keeper_of_nothing_gives_nothing_back() -> None:
    kept = Kept(cap=8)
    assert kept.text() == ""
    kept.write("")
    assert kept.text() == ""
    kept.write("a")
    assert kept.text() == "a"
