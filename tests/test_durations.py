"""Durations as people write them (cronsvc.durations): what each form is worth, and the
message a value that is not one gets; and durations as pages say them
(:func:`cronsvc.durations.spoken`)."""

from __future__ import annotations

import pytest

from cronsvc.durations import HINT, parse_duration, spoken

NOT_A_DURATION = f"not a duration ({HINT})"


@pytest.mark.parametrize(("value", "seconds"), [
    (30, 30.0), (2.5, 2.5), ("45", 45.0), ("30s", 30.0), ("5m", 300.0), ("2h", 7200.0),
    ("1d", 86400.0), ("1h30m", 5400.0), ("1h 30m", 5400.0), ("1.5h", 5400.0), ("500ms", 0.5),
    ("2M", 120.0),
])
def test_durations(value: object, seconds: float) -> None:
    assert parse_duration(value) == seconds


@pytest.mark.parametrize("value", [0, "0s", -1, "-5m", "5 minutes", "m5", "", True, None, [1],
                                   "nan", "inf"])
def test_bad_durations(value: object) -> None:
    with pytest.raises(ValueError):
        parse_duration(value)


def test_zero_jitter_is_allowed() -> None:
    assert parse_duration("0s", allow_zero=True) == 0.0


@pytest.mark.parametrize(("value", "seconds"), [
    ("1", 1.0), ("0.5", 0.5), (" 30s ", 30.0), ("250ms", 0.25), ("1.5s", 1.5),
    ("1m500ms", 60.5),  # ms is read before m: not 1 minute, 500 minutes and an "s"
    ("1d2h3m4s", 93_784.0), ("1s1s", 2.0), ("1H", 3600.0), ("2D", 172_800.0),
    (1_000_000, 1_000_000.0), (1.0, 1.0), ("90", 90.0),
])
def test_more_forms(value: object, seconds: float) -> None:
    assert parse_duration(value) == seconds


@pytest.mark.parametrize(("value", "allow_zero", "message"), [
    (0, False, "must be positive"),
    ("0s", False, "must be positive"),
    ("0ms", False, "must be positive"),
    (-1, False, "must be positive"),
    (-1, True, "must not be negative"),
    (-0.5, True, "must not be negative"),
    ("-1s", False, NOT_A_DURATION),  # a sign goes only with plain seconds
    ("-5", True, "must not be negative"),
    ("5 minutes", False, NOT_A_DURATION),
    ("1x", True, NOT_A_DURATION),
    ("5mm", False, NOT_A_DURATION),
    ("s", False, NOT_A_DURATION),
    (".5s", False, NOT_A_DURATION),
    ("", False, NOT_A_DURATION),
    (True, True, NOT_A_DURATION),  # a YAML yes is not one second
    (None, True, NOT_A_DURATION),
    (b"5", False, NOT_A_DURATION),
    ({}, False, NOT_A_DURATION),
    ("inf", True, NOT_A_DURATION),
    ("nan", True, NOT_A_DURATION),
    (float("inf"), False, NOT_A_DURATION),
])
def test_messages(value: object, allow_zero: bool, message: str) -> None:
    with pytest.raises(ValueError) as caught:
        parse_duration(value, allow_zero=allow_zero)
    assert str(caught.value) == message


@pytest.mark.parametrize("value", [0, 0.0, "0", "0s", "0ms", "0h0m"])
def test_zero_only_when_allowed(value: object) -> None:
    assert parse_duration(value, allow_zero=True) == 0.0
    with pytest.raises(ValueError, match="^must be positive$"):
        parse_duration(value)


@pytest.mark.parametrize(("ms", "text"), [
    (0, "0 ms"), (850, "850 ms"), (1000, "1 s"), (3200, "3.2 s"), (9999, "10 s"),
    (20_000, "20 s"), (20_400, "20 s"), (125_000, "2 min 5 s"), (3_600_000, "1 h"),
    (3_600_000.0, "1 h"), (7_200_000, "2 h"), (5_400_000, "1 h 30 min"),
    (97_200_000, "1 d 3 h"), (90_061_000, "1 d 1 h"),
])
def test_spoken_durations(ms: float, text: str) -> None:
    assert spoken(ms) == text
