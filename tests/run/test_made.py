"""Frozen dataclasses made per fire without their ``__init__``: the same instances."""

from __future__ import annotations

import dataclasses

import pytest

from cronsvc.run.context import FireContext
from cronsvc.run.made import made
from cronsvc.run.outcome import Outcome


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
