"""The loader's includes: an include may include others, each lands once per script, and a
cycle is refused by name. The scripts built are run on a real Redis: what they define is
there, once, before it is used."""

from __future__ import annotations

import re
from itertools import takewhile
from pathlib import Path

import pytest
import redis

from cronsvc.errors import ScriptError
from cronsvc.store.loader import INCLUDES, load_sources, lua_dir


def tree(tmp_path: Path, files: dict[str, str]) -> Path:
    """A lua/ folder of ``files``: scripts by their name, includes as ``includes/NAME``."""
    (tmp_path / INCLUDES).mkdir()
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    return tmp_path


def test_an_include_includes_what_it_needs(tmp_path: Path, r: redis.Redis) -> None:
    src = load_sources(tree(tmp_path, {
        "includes/inner.lua": "-- inner: one()\nlocal function one() return 1 end\n",
        "includes/outer.lua": "-- outer: two(), from inner's one()\n-- @include inner.lua\n"
                              "local function two() return one() + one() end\n",
        "sum-0.lua": "-- sum\n-- @include outer.lua\nreturn one() + two()\n",
    }))["sum"]
    assert src.text.index("local function one") < src.text.index("local function two")
    assert "@include" not in src.text
    assert r.eval(src.text, 0) == 3


def test_an_include_named_twice_lands_once(tmp_path: Path, r: redis.Redis) -> None:
    src = load_sources(tree(tmp_path, {
        "includes/base.lua": "-- base: n\nlocal n = 0\n",
        "includes/a.lua": "-- a: a()\n-- @include base.lua\n"
                          "local function a() n = n + 1 return n end\n",
        "includes/b.lua": "-- b: b()\n-- @include base.lua\n"
                          "local function b() n = n + 10 return n end\n",
        "both-0.lua": "-- both\n-- @include a.lua\n-- @include base.lua\n"
                      "-- @include b.lua\na()\nreturn b()\n",
    }))["both"]
    # One n, shared: a second copy would shadow the first, and a() and b() would count apart.
    assert src.text.count("local n = 0") == 1
    assert r.eval(src.text, 0) == 11


@pytest.mark.parametrize(("files", "cycle"), [
    ({"includes/a.lua": "-- @include a.lua\n"}, "a.lua -> a.lua"),
    ({"includes/a.lua": "-- @include b.lua\n", "includes/b.lua": "-- @include c.lua\n",
      "includes/c.lua": "-- @include b.lua\n"}, "b.lua -> c.lua -> b.lua"),
])
def test_a_cycle_of_includes_is_named(tmp_path: Path, files: dict[str, str], cycle: str) -> None:
    base = tree(tmp_path, {**files, "loop-0.lua": "-- loop\n-- @include a.lua\nreturn 0\n"})
    with pytest.raises(ScriptError, match=re.escape(f"loop-0.lua: includes in a cycle: {cycle}")):
        load_sources(base)


def test_a_missing_include_names_the_script(tmp_path: Path) -> None:
    base = tree(tmp_path, {"includes/a.lua": "-- @include gone.lua\n",
                           "lost-0.lua": "-- lost\n-- @include a.lua\nreturn 0\n"})
    with pytest.raises(ScriptError, match="lost-0.lua: cannot include gone.lua: no "):
        load_sources(base)


def test_no_script_holds_an_include_twice() -> None:
    """Every include's header line is in each script that uses it once, however named."""
    heads = {p.name: p.read_text().splitlines()[0] for p in (lua_dir() / INCLUDES).glob("*.lua")}
    for src in load_sources().values():
        for name, head in heads.items():
            assert src.text.count(head + "\n") <= 1, (src.path.name, name)


_DEFINES = re.compile(r"^local (?:function )?([a-z_][\w, ]*?)\s*(?:=|\(|$)", re.MULTILINE)


@pytest.mark.parametrize("path", sorted((lua_dir() / INCLUDES).glob("*.lua")), ids=lambda p: p.name)
def test_an_include_header_lists_what_it_defines(path: Path) -> None:
    """A script's reader finds what an include gives it in the include's first comment lines
    (its constants, in capitals, are its own business)."""
    text = path.read_text()
    head = "\n".join(takewhile(lambda x: x.startswith("--") and not x.startswith("-- @include"),
                               text.splitlines()))
    defined = {name.strip() for names in _DEFINES.findall(text) for name in names.split(",")}
    assert head.startswith(f"-- {path.stem}: ")
    assert sorted(n for n in defined if not re.search(rf"\b{n}\b", head)) == []
