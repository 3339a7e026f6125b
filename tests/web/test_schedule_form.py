"""The dashboard's schedule form (cronsvc/web/schedule_form.py): a schedule written into
the form and posted back unchanged is the same schedule, its calendar kept; the field an
error names is the one the page marks."""

from __future__ import annotations

import pytest

from cronsvc.errors import BadArgument
from cronsvc.schedule.runtime import build
from cronsvc.web.schedule_form import field_of, fields, filled, kept

NOW = 1_795_000_000_000


@pytest.mark.parametrize("given", [
    {"cron": "0 9 * * 1-5", "timezone": "Europe/Berlin", "payload": {"user": 42}},
    {"every": "90m", "anchor": "2026-11-01T00:00:00Z", "max_runs": 30, "jitter": "15s",
     "catch_up": "all", "starting_deadline": "5m", "overlap": "forbid", "paused": True,
     "payload": [1, "two", None]},
    {"cron": "0 8 * * *", "business_days": True, "skip": {"holidays": "DE-BY"},
     "only": "last_business_day", "start": "2026-12-01T08:00:00+01:00",
     "end": "2027-12-01T08:00:00+01:00"},
])
def test_a_schedule_posted_back_unchanged_is_the_same(given: dict[str, object]) -> None:
    s = build("digest:user-42", job="digest", now_ms=NOW, **given)  # type: ignore[arg-type]
    form = {**filled(s), "paused": "true" if s.paused else ""}
    again = build(s.id, job="digest", now_ms=NOW, **{**kept(s), **fields(form, s.id)})
    assert again.content == s.content


def test_a_payload_that_is_no_json_says_where() -> None:
    with pytest.raises(BadArgument, match=r"^schedule 'x': payload: not JSON: .* column 9"):
        fields({"every": "1h", "payload": '{"user" 42}'}, "x")


@pytest.mark.parametrize(("message", "field"), [
    ("schedule 'x': cron: '61 * * * *': minute 61 is out of range", "cron"),
    ("schedule 'x': timezone: unknown time zone 'Mars/Olympus'", "timezone"),
    ("schedule 'x': payload: not JSON: Expecting value: line 1 column 1 (char 0)", "payload"),
    ("schedule \"it's\": max_runs: 'ten': a whole number of at least 1", "max_runs"),
    ("schedule id 'a b': use 1 to 200 letters, digits, ...", "id"),
    ("schedule 'x': job: unknown job 'nope'", None),  # the page's job, not a field
    ("schedule 'x': skip.holidays: 'XX': unknown", None),  # the calendar, not in the form
    ("schedule 'x': changed by others 20 times; try again", None),
])
def test_the_field_an_error_names(message: str, field: str | None) -> None:
    assert field_of(message) == field
