"""Redis replies as plain Python values, and JSON as cronsvc stores it (cronsvc.store.replies)."""

from __future__ import annotations

from typing import Any

import pytest

from cronsvc.store.replies import compact, integer, json_object, opt_text, text, texts


@pytest.mark.parametrize(("reply", "expected"), [
    (b"a", "a"), ("a", "a"), (b"", ""), ("\u00e9".encode(), "\u00e9"), (1, "1"), (1.5, "1.5"),
])
def test_text(reply: Any, expected: str) -> None:
    assert text(reply) == expected


@pytest.mark.parametrize(("reply", "expected"), [
    (None, None), (b"x", "x"), ("x", "x"), (0, "0"), (b"", ""),
])
def test_opt_text(reply: Any, expected: str | None) -> None:
    assert opt_text(reply) == expected


@pytest.mark.parametrize(("reply", "expected"), [
    ({}, {}),
    ({b"a": b"1", "b": 2}, {"a": "1", "b": "2"}),
    ({"w1": '{"busy":1}'}, {"w1": '{"busy":1}'}),
])
def test_texts(reply: dict[Any, Any], expected: dict[str, str]) -> None:
    assert texts(reply) == expected


@pytest.mark.parametrize(("raw", "expected"), [
    ('{"a":1}', {"a": 1}),
    (b'{"a":1}', {"a": 1}),
    ("{}", {}),
    (None, None), ("", None), (b"", None), (0, None),
    ("[1]", None), ("1", None), ("null", None), ('"x"', None),  # JSON, but not an object
    ("nope", None), ("{", None), (b"\xff", None),
])
def test_json_object(raw: Any, expected: dict[str, Any] | None) -> None:
    assert json_object(raw) == expected


@pytest.mark.parametrize(("raw", "expected"), [
    ("1", 1), (b"2", 2), (" 3 ", 3), ("-5", -5), (4, 4), (4.7, 4),
    (None, None), ("", None), ("1.5", None), ("x", None), (b"", None), ([1], None),
])
def test_integer(raw: Any, expected: int | None) -> None:
    assert integer(raw) == expected


@pytest.mark.parametrize(("value", "expected"), [
    ({"a": [1, 2], "b": None}, '{"a":[1,2],"b":null}'),
    ("x", '"x"'),
    ({"\u00e9": 1}, '{"\\u00e9":1}'),
    ([], "[]"),
])
def test_compact(value: Any, expected: str) -> None:
    assert compact(value) == expected
    assert json_object(expected) == (value if isinstance(value, dict) else None)
