"""Every Lua script's header says what its KEYS and ARGV are, and its body agrees.

The header is the comment lines a script file starts with, up to its first code line or
``-- @include``. It lists ``KEYS[1]`` .. ``KEYS[n]``, one line each, n the number in
the file name (a ``+`` script may add a ``KEYS[n + i]`` family line), and every argument:
``ARGV[i]`` for one, ``ARGV[i..]`` for those from i on (the body reads them by a computed
index or ``#ARGV``). ``ARGV[1]`` is ``now_ms`` exactly when the script reads the clock,
which only ``-- @include now.lua`` does. The body is read with its includes expanded and
without comments; no Redis is needed.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from cronsvc.store.loader import ScriptSource, load_sources, lua_dir

SOURCES = load_sources()

_LONG_BRACKET = re.compile(r"\[(=*)\[")
_KEY_LINE = re.compile(r"^--\s*KEYS\[(\d+)\]", re.MULTILINE)
_KEY_FAMILY = re.compile(r"KEYS\[(\d+)\s*\+\s*[a-z]\]")
_KEY_INDEX = re.compile(r"\bKEYS\[\s*(\d+)\s*\]")
_KEY_COMPUTED = re.compile(r"\bKEYS\b(?!\[\s*\d+\s*\])")
_ARG_INDEX = re.compile(r"\bARGV\[\s*(\d+)\s*\]")
_ARG_FROM = re.compile(r"\bARGV\[(\d+)\.\.\]")
_ARG_COMPUTED = re.compile(r"\bARGV\b(?!\[\s*\d+\s*\])")  # ARGV[i], #ARGV, unpack(ARGV)
_NOW_MS = re.compile(r"^--\s*ARGV\[1\]\s+now_ms\b", re.MULTILINE)
_TIME = re.compile(r"""\bredis\.p?call\(\s*(['"])TIME\1""")
_NOW = re.compile(r"(?<![\w.])now\b")
_INCLUDES_NOW = re.compile(r"^-- @include now\.lua$", re.MULTILINE)


def code(text: str, *, strings: bool = True) -> str:
    """Lua ``text`` without its comments (and without what its strings hold, unless
    ``strings``): what the interpreter reads, not what a comment says about it."""
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        if text.startswith("--", i):
            long = _LONG_BRACKET.match(text, i + 2)
            if long:
                end = text.find("]" + long.group(1) + "]", long.end())
                i = n if end < 0 else end + len(long.group(1)) + 2
            else:
                end = text.find("\n", i)
                i = n if end < 0 else end
            continue
        long = _LONG_BRACKET.match(text, i)
        if text[i] in "'\"" or long:
            if long:
                end = text.find("]" + long.group(1) + "]", long.end())
                stop = n if end < 0 else end + len(long.group(1)) + 2
            else:
                stop = i + 1
                while stop < n and text[stop] != text[i]:
                    stop += 2 if text[stop] == "\\" else 1
                stop += 1
            out.append(text[i:stop] if strings else "''")
            i = stop
            continue
        out.append(text[i])
        i += 1
    return "".join(out)


def header(raw: str) -> str:
    """The comment lines ``raw`` starts with, up to its first include or code line."""
    lines = []
    for line in raw.splitlines():
        if not line.startswith("--") or line.startswith("-- @include"):
            break
        lines.append(line)
    return "\n".join(lines)


def problems(src: ScriptSource) -> list[str]:
    """What the header of ``src`` gets wrong about its file name and its body."""
    raw = src.path.read_text()
    head, body, own = header(raw), code(src.text), code(raw)
    n, out = src.numkeys, []

    # KEYS: one line each for 1..n, none used past them.
    listed = [int(k) for k in _KEY_LINE.findall(head)]
    if listed != list(range(1, n + 1)):
        out.append(f"header lists KEYS {listed}, the file name says KEYS[1]..KEYS[{n}]")
    families = {int(k) for k in _KEY_FAMILY.findall(head)}
    if families and (not src.more_keys or families != {n}):
        out.append(f"header has a KEYS[k + i] family with k in {sorted(families)}: only a "
                   f"'+' script has one, and k is {n}")
    mentioned = {int(k) for k in _KEY_INDEX.findall(head)}
    used = {int(k) for k in _KEY_INDEX.findall(body)}
    out += [f"header mentions KEYS[{k}] past KEYS[{n}]" for k in sorted(mentioned) if k > n]
    out += [f"body uses KEYS[{k}], the header lists KEYS[1]..KEYS[{n}]"
            for k in sorted(used) if not 1 <= k <= n]
    if not src.more_keys and _KEY_COMPUTED.search(body):
        out.append("body indexes KEYS by a computed index: only a '+' script may")

    # ARGV: what the header lists is what the body reads, 1..k with no gap.
    listed_args = {int(a) for a in _ARG_INDEX.findall(head)}
    used_args = {int(a) for a in _ARG_INDEX.findall(body)}
    rest = sorted({int(a) for a in _ARG_FROM.findall(head)})
    out += [f"body uses ARGV[{a}], the header does not list it"
            for a in sorted(used_args - listed_args)]
    out += [f"header lists ARGV[{a}], the body never uses it"
            for a in sorted(listed_args - used_args)]
    if len(rest) > 1:
        out.append(f"header documents ARGV[k..] for several k: {rest}")
    end = rest[0] if rest else max(listed_args, default=0) + 1
    if listed_args != set(range(1, end)):
        out.append(f"header lists ARGV {sorted(listed_args)}"
                   + (f" before ARGV[{end}..]" if rest else "") + f", not ARGV[1]..ARGV[{end - 1}]")
    computed = bool(_ARG_COMPUTED.search(body))
    if computed and not rest:
        out.append("body reads ARGV by a computed index or #ARGV, the header lists no ARGV[k..]")
    if rest and not computed:
        out.append(f"header lists ARGV[{rest[0]}..], the body reads no ARGV past fixed indices")

    # The clock: ARGV[1] is now_ms exactly when the script reads the time, from now.lua only.
    reads_time = bool(_TIME.search(body))
    if bool(_NOW_MS.search(head)) != reads_time:
        out.append("reads the clock, so ARGV[1] must be documented as now_ms" if reads_time
                   else "reads no clock, yet ARGV[1] is documented as now_ms")
    if _TIME.search(own):
        out.append("calls TIME itself: read the clock with -- @include now.lua")
    if bool(_INCLUDES_NOW.search(raw)) != bool(_NOW.search(code(raw, strings=False))):
        out.append("includes now.lua without using now" if _INCLUDES_NOW.search(raw)
                   else "uses now without -- @include now.lua")
    return out


@pytest.mark.parametrize("name", sorted(SOURCES))
def test_header_matches_file_name_and_body(name: str) -> None:
    assert problems(SOURCES[name]) == []


def test_every_script_file_is_checked() -> None:
    assert sorted(p.name for p in lua_dir().glob("*.lua")) == sorted(
        src.path.name for src in SOURCES.values())


def test_code_drops_comments_and_optionally_strings() -> None:
    text = "local a = 'x -- y' -- KEYS[1]\n--[[ ARGV[2]\n]] b = \"TIME\" --[==[ now ]==] c"
    assert code(text) == "local a = 'x -- y' \n b = \"TIME\"  c"
    assert code(text, strings=False) == "local a = '' \n b = ''  c"


# Each breaks one script of a copy of lua/: (file, text replaced, replacement, problem).
BREAKS = {
    "key line missing": (
        "cancel-4.lua", "-- KEYS[3] attempts", "-- attempts", "header lists KEYS [1, 2, 4]"),
    "key past the header": (
        "cancel-4.lua", "return 1\n", "redis.call('DEL', KEYS[5])\nreturn 1\n",
        "body uses KEYS[5]"),
    "key family without +": (
        "record-2.lua", "-- ARGV[1] history", "-- KEYS[2 + i] more\n-- ARGV[1] history",
        "only a '+' script has one"),
    "key family off by one": ("ack-8+.lua", "-- KEYS[8 + i]", "-- KEYS[9 + i]", "k is 8"),
    "argument not listed": (
        "cancel-4.lua", "local fid = ARGV[2]", "local fid = ARGV[2] .. ARGV[3]",
        "body uses ARGV[3], the header does not list it"),
    "argument listed, never used": (
        "cancel-4.lua", "-- ARGV[2] fire", "-- ARGV[2] fire\n-- ARGV[3] unused",
        "header lists ARGV[3], the body never uses it"),
    "gap in the arguments": (
        "enqueue-6.lua", "-- ARGV[1]", "-- ARGV[6]", "not ARGV[1]..ARGV[6]"),
    "computed index, no ARGV[k..]": (
        "heartbeat-3.lua", "-- ARGV[3..] pairs", "-- pairs", "the header lists no ARGV[k..]"),
    "now_ms of a script without a clock": (
        "record-2.lua", "-- ARGV[1] history record JSON", "-- ARGV[1] now_ms",
        "reads no clock, yet ARGV[1] is documented as now_ms"),
    "a clock without now_ms": (
        "retry-4.lua", "-- ARGV[1] now_ms, or '' for the server clock", "-- ARGV[1] the clock",
        "ARGV[1] must be documented as now_ms"),
    "a prelude copied by hand": (
        "retry-4.lua", "-- @include now.lua\n", (lua_dir() / "includes" / "now.lua").read_text(),
        "calls TIME itself"),
    "now without the prelude": (
        "record-2.lua", "return 1", "return now", "uses now without -- @include now.lua"),
}


@pytest.mark.parametrize("case", sorted(BREAKS))
def test_a_broken_header_is_caught(tmp_path: Path, case: str) -> None:
    file, old, new, problem = BREAKS[case]
    verb = file.split("-")[0]
    good, bad = tmp_path / "good", tmp_path / "bad"
    shutil.copytree(lua_dir(), good)
    shutil.copytree(lua_dir(), bad)
    text = (bad / file).read_text()
    assert old in text, "the script changed: update this case"
    (bad / file).write_text(text.replace(old, new, 1))
    assert problems(load_sources(good)[verb]) == []  # the copy as it was passes
    found = problems(load_sources(bad)[verb])
    assert any(problem in p for p in found), found
