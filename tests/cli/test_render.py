"""How the CLI prints spans and times (cronsvc.cli.render)."""

from __future__ import annotations

import pytest

from cronsvc.cli.render import relative, span, table

T0 = 1_900_000_000_000  # 2030-03-17T17:46:40Z


@pytest.mark.parametrize("ms, text", [(850, "850ms"), (3_200, "3.2s"), (245_000, "4m 5s"),
                                      (7_200_000, "2h"), (183_600_000, "2d 3h")])
def test_spans_use_two_units_at_most(ms: int, text: str) -> None:
    assert span(ms) == text


def test_relative_times() -> None:
    assert (relative(T0 + 180_000, T0), relative(T0 - 12_000, T0), relative(T0 + 300, T0)) == (
        "in 3m", "12s ago", "now")


def test_a_table_shows_each_cell_on_one_line_escaped_and_aligned() -> None:
    assert table(["NAME", "NOTE"], [["a\nb\x1b", "x"], ["c", "\ty\u202e"]]).splitlines() == [
        "NAME        NOTE", r"a\x0ab\x1b  x", r"c           \x09y\u202e"]
