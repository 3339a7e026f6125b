"""What the CLI writes to the terminal: every line goes through here.

Much of what the commands print comes from outside: a job's output, errors, notes,
actors, worker names, job names and schedule ids read from Redis, the job file's
descriptions. A control character in it would be obeyed by the terminal (ESC starts
sequences that retitle the window, clear the screen or rewrite what was printed) and a
bidi override would reorder what the operator reads, so text for people shows them as
escapes instead. ``--json`` is printed exactly as ``json.dumps`` wrote it.
"""

from __future__ import annotations

import click

# C0, DEL and C1, as \xNN the way Python writes them (a whole text keeps its newlines and
# tabs: see printable).
_CONTROLS = {c: f"\\x{c:02x}" for c in (*range(0x20), *range(0x7F, 0xA0))}
# The explicit embeddings, overrides and isolates of Unicode's bidi algorithm: they make
# a terminal show characters in another order than they come (CVE-2021-42574).
_BIDI = {c: f"\\u{c:04x}" for c in (*range(0x202A, 0x202F), *range(0x2066, 0x206A))}
_CELL = str.maketrans({**_CONTROLS, **_BIDI})
_TEXT = str.maketrans({c: e for c, e in {**_CONTROLS, **_BIDI}.items()
                       if chr(c) not in "\n\t"})


def printable(text: str, *, cell: bool = False) -> str:
    """``text`` with its control and bidi characters shown: ``\\x1b``, ``\\x9b``, ``\\u202e``.

    A whole text keeps its newlines and tabs: they only lay it out (a job's output is
    lines, often with tabs). A ``cell`` (a value in a table, a column measured by its
    length) must stay on one line, so there they are shown too. A backslash is left as
    it is: text already shown comes out unchanged, and ``--json`` tells the two apart.
    """
    return text.translate(_CELL if cell else _TEXT)


def echo(text: str, *, err: bool = False, nl: bool = True) -> None:
    """Print ``text`` for people (stdout, or stderr with ``err``), shown :func:`printable`;
    without its newline if not ``nl`` (output as it comes)."""
    click.echo(printable(text), err=err, nl=nl)


def echo_json(text: str) -> None:
    """Print JSON as ``json.dumps`` wrote it, to be read back exactly. It is safe as is:
    with ``ensure_ascii`` (the default, which every ``--json`` uses) a string's control,
    C1 and bidi characters are ``\\u`` escapes, and the only character below a space or
    past ASCII left is the newline of the indentation."""
    click.echo(text)
