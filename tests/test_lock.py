"""The lock file is what `make run` and `make test` install: it must pin every requirement of
pyproject.toml (its extras too) to a version the range allows. A range changed without
`make lock` fails here, not on a fresh machine."""

from __future__ import annotations

import re
import tomllib

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tests.support.paths import ROOT

_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;]+)", re.MULTILINE)


def pins() -> dict[str, str]:
    text = (ROOT / "requirements.lock").read_text()
    return {canonicalize_name(name): version for name, version in _PIN.findall(text)}


def requirements() -> list[Requirement]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    listed = project["dependencies"] + [r for extra in ("test", "dev")
                                        for r in project["optional-dependencies"][extra]]
    return [Requirement(r) for r in listed]


def test_every_requirement_is_pinned_to_a_version_its_range_allows() -> None:
    locked = pins()
    missing = [str(r) for r in requirements() if canonicalize_name(r.name) not in locked]
    assert missing == [], f"not in requirements.lock (run make lock): {missing}"
    outside = [f"{r} is locked at {locked[canonicalize_name(r.name)]}" for r in requirements()
               if not r.specifier.contains(locked[canonicalize_name(r.name)], prereleases=True)]
    assert outside == [], outside


def test_the_lock_pins_what_the_requirements_pull_in_too() -> None:
    locked = pins()
    for name in ("hiredis", "starlette", "anyio", "pydantic-core", "tzlocal"):
        assert canonicalize_name(name) in locked, name
