"""The errors' shared pieces (cronsvc.errors): the "did you mean" tail of a message."""

from __future__ import annotations

from typing import Any

import pytest

from cronsvc.errors import did_you_mean

JOBS = ["nightly", "hourly", "backup", "report"]


@pytest.mark.parametrize(("word", "choices", "options", "tail"), [
    ("nigthly", JOBS, {}, "; did you mean 'nightly'?"),
    ("backpu", JOBS, {}, "; did you mean 'backup'?"),
    ("Nightly", JOBS, {}, "; did you mean 'nightly'?"),
    ("nigthly", JOBS, {"quote": False}, "; did you mean nightly?"),
    ("nightl", ["nightly", "nightlyy", "daily"], {"n": 2}, "; did you mean 'nightly', 'nightlyy'?"),
    ("nightl", ["nightly", "nightlyy", "daily"], {}, "; did you mean 'nightly'?"),  # n=1
    (5, ["5s", "10s"], {}, "; did you mean '5s'?"),  # any value, as text
    ("zzz", JOBS, {}, ""),  # nothing close: no tail
    ("x", [], {}, ""),
    ("nightly", iter(JOBS), {}, "; did you mean 'nightly'?"),  # any iterable
])
def test_did_you_mean(word: object, choices: Any, options: dict[str, Any], tail: str) -> None:
    assert did_you_mean(word, choices, **options) == tail
