"""Fire ids (cronsvc.fires): how they are written and read back, and the tags of one-offs."""

from __future__ import annotations

import re

import pytest

from cronsvc.errors import BadArgument, CronsvcError
from cronsvc.fires import TAG_KINDS, fire_id, job_of, kind_of, new_tag, parse_fire, split_fire


@pytest.mark.parametrize(("job", "due_ms", "tag", "fid"), [
    ("backup", 1_900_000_000_000, None, "backup@1900000000000"),
    ("backup", 1_900_000_000_000, "tabc234", "backup@1900000000000#tabc234"),
    ("backup", 5, "", "backup@5"),  # an empty tag is no tag
    ("a-b.c_d", 0, None, "a-b.c_d@0"),
    ("j", 1000.9, None, "j@1000"),  # whole ms
])
def test_fire_id_and_back(job: str, due_ms: float, tag: str | None, fid: str) -> None:
    assert fire_id(job, due_ms, tag) == fid  # type: ignore[arg-type]
    assert parse_fire(fid) == (job, int(due_ms), tag or None)


@pytest.mark.parametrize(("fid", "parsed"), [
    ("a@1", ("a", 1, None)),
    ("a@1#tabc", ("a", 1, "tabc")),
    ("a@01", ("a", 1, None)),
])
def test_parse_fire(fid: str, parsed: tuple[str, int, str | None]) -> None:
    assert parse_fire(fid) == parsed


@pytest.mark.parametrize("fid", [
    "", "a", "a@", "@1", "a@1x", "a@-1", "a@1#", "a@ 1", "a@1.5", "a1",
    # What a job name, tag or schedule id never holds, and a time past 15 digits.
    "with space@7#a1", "a@1#x#y", "a@1\n", "a@1\nx", "a@1!", "a@1!a|b", "-a@1",
    "a@1234567890123456", "a@1!@", "\u00e9@1",
])
def test_a_bad_fire_id_is_a_bad_argument(fid: str) -> None:
    with pytest.raises(BadArgument) as caught:
        parse_fire(fid)
    assert str(caught.value) == f"not a fire id: {fid!r} (expected <job>@<due_ms>[#<tag>])"
    assert isinstance(caught.value, ValueError) and isinstance(caught.value, CronsvcError)


@pytest.mark.parametrize(("fid", "job"), [
    ("a@1", "a"), ("nightly@1900000000000#tabcdef", "nightly"), ("x_y@2#a", "x_y"),
])
def test_job_of(fid: str, job: str) -> None:
    assert job_of(fid) == job == parse_fire(fid)[0]


def test_job_of_a_text_without_at_is_a_value_error() -> None:
    with pytest.raises(ValueError):
        job_of("nightly")


@pytest.mark.parametrize(("fid", "kind"), [
    ("a@1", "cron"),
    ("a@1#tabcdef", "trigger"),
    ("a@1#aabcdef", "at"),
    (fire_id("a", 1, "t"), "trigger"),
])
def test_kind_of(fid: str, kind: str) -> None:
    assert kind_of(fid) == kind


def test_kind_of_a_bad_fire_id_is_a_bad_argument() -> None:
    with pytest.raises(BadArgument):
        kind_of("nightly")


@pytest.mark.parametrize(("kind", "prefix", "named"), [
    ("trigger", "t", "trigger"), ("t", "t", "trigger"), ("at", "a", "at"), ("a", "a", "at"),
])
def test_new_tag(kind: str, prefix: str, named: str) -> None:
    tags = {new_tag(kind) for _ in range(50)}
    assert all(re.fullmatch(prefix + "[a-z2-7]{6}", tag) for tag in tags), tags
    assert len(tags) > 45  # 30 random bits each: fresh every time
    assert {kind_of(fire_id("j", 1, tag)) for tag in tags} == {named}


@pytest.mark.parametrize("kind", ["", "x", "T", "cron", "tt"])
def test_new_tag_of_an_unknown_kind(kind: str) -> None:
    with pytest.raises(ValueError) as caught:
        new_tag(kind)
    assert str(caught.value) == (
        f"unknown one-off kind {kind!r}: expected one of {sorted(TAG_KINDS)}")


def test_a_host_s_run_of_an_each_host_fire_belongs_to_the_job_not_a_schedule() -> None:
    from cronsvc.fires import host_fire, host_of, placed_by, schedule_of

    fid = host_fire("sweep@1800000000000", "web-1.example")
    assert fid == "sweep@1800000000000!@web-1.example"
    assert (host_of(fid), schedule_of(fid), placed_by(fid), kind_of(fid)) == (
        "web-1.example", None, "sweep", "host")
    assert host_of("sweep@1800000000000!nightly") is None
    one_off = host_fire("sweep@1800000000000#t2345ab", "b")  # a trigger: on each host too
    assert (host_of(one_off), schedule_of(one_off), placed_by(one_off)) == ("b", None, "sweep")


def test_split_fire_reads_every_kind_of_id_as_parse_fire_does() -> None:
    for fid, bang in (("a.b-c@1763830800000", None), ("job@5#tabcdef", None),
                      ("job@5!sched-1", "sched-1"), ("job@5!@host-1", "@host-1")):
        job, due, tag = parse_fire(fid)
        assert split_fire(fid) == (job, due, tag, bang), fid
