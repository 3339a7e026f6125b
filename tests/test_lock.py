"""The lock file is what `make run` and `make test` install: it must pin every requirement of
pyproject.toml (its extras too) to a version the range allows. A range changed without
`make lock` fails here, not on a fresh machine. So must arq's lock, which `make test`
installs into a venv of its own (arq pins redis-py below 6)."""

from __future__ import annotations

import re
import tomllib

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tests.support.paths import ROOT

_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;]+)", re.MULTILINE)


#: Each lock file, and the extras it installs beside the dependencies.
LOCKS = {"requirements.lock": ("test", "dev"), "requirements-arq.lock": ("arq", "test")}


def pins(lock: str = "requirements.lock") -> dict[str, str]:
    text = (ROOT / lock).read_text()
    return {canonicalize_name(name): version for name, version in _PIN.findall(text)}


def requirements(extras: tuple[str, ...]) -> list[Requirement]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    listed = project["dependencies"] + [r for extra in extras
                                        for r in project["optional-dependencies"][extra]]
    return [Requirement(r) for r in listed]


@pytest.mark.parametrize("lock", LOCKS)
def test_every_requirement_is_pinned_to_a_version_its_range_allows(lock: str) -> None:
    locked, wanted = pins(lock), requirements(LOCKS[lock])
    missing = [str(r) for r in wanted if canonicalize_name(r.name) not in locked]
    assert missing == [], f"not in {lock} (run make lock): {missing}"
    outside = [f"{r} is locked at {locked[canonicalize_name(r.name)]}" for r in wanted
               if not r.specifier.contains(locked[canonicalize_name(r.name)], prereleases=True)]
    assert outside == [], outside


def test_the_arq_lock_keeps_redis_py_below_6_beside_arq() -> None:
    locked = pins("requirements-arq.lock")
    assert "arq" in locked and int(locked["redis"].split(".")[0]) < 6


def test_the_lock_pins_what_the_requirements_pull_in_too() -> None:
    locked = pins()
    for name in ("hiredis", "starlette", "anyio", "pydantic-core", "tzlocal"):
        assert canonicalize_name(name) in locked, name
