"""WHEN of ``cronsvc at`` (cronsvc.schedule.when): a delay from the server clock or an
ISO time. Its range limits are in tests/test_hostile_input.py."""

from __future__ import annotations

import pytest

from cronsvc.schedule.when import parse_when

T0 = 1_900_000_000_000  # 2030-03-17T17:46:40Z


@pytest.mark.parametrize("text, due", [
    ("+30s", T0 + 30_000), ("+10m", T0 + 600_000), ("+1h30m", T0 + 5_400_000),
    ("now", T0), ("2030-03-17T18:00", 1_900_000_800_000),
    ("2030-03-17T18:00Z", 1_900_000_800_000), ("2030-03-17T19:00+01:00", 1_900_000_800_000),
])
def test_when_is_a_delay_from_the_server_clock_or_an_iso_time(text: str, due: int) -> None:
    assert parse_when(text, T0) == due


def test_when_without_offset_reads_in_the_zone_given() -> None:
    assert parse_when("2030-03-17T19:00", T0, "Europe/Berlin") == 1_900_000_800_000
    with pytest.raises(ValueError, match="in the past"):
        parse_when("2030-03-17T17:00", T0)
