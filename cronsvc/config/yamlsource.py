"""Load YAML into plain data while keeping the line of every key.

PyYAML's loaders forget where a value came from and silently keep the last of
two equal keys. Error messages must name the line, and a duplicated job name
must be an error, so this module composes the node tree and builds the data
itself: a side table maps each path (``("jobs", "backup", "cron")``) to the
1-based line of its key (or of its item in a list).

The file is input from outside: aliases may repeat a block (a shared
``defaults`` is normal YAML), but each repeat is built anew, so nine nested
aliases of nine items (a "billion laughs" of a few hundred bytes) would build
hundreds of millions of values. The builder counts what aliases add and stops
past :data:`ALIAS_NODES` plus :data:`ALIAS_FACTOR` times the nodes written in
the text (at most :data:`ALIAS_NODES_MAX`); a cycle of aliases and very deep
nesting are refused too.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

KeyPath = tuple[str | int, ...]

_MERGE_TAG = "tag:yaml.org,2002:merge"

#: Nodes aliases may build beyond those written in the text (a few MB at most)...
ALIAS_NODES = 20_000
#: ...plus this many per node written, so a big file sharing a block in every job loads...
ALIAS_FACTOR = 8
#: ...but never more than this (a few hundred MB, for the largest file read).
ALIAS_NODES_MAX = 2_000_000


class YamlSyntaxError(Exception):
    """The text is not YAML; ``line`` is 1-based, or None when PyYAML gives no mark."""

    def __init__(self, message: str, line: int | None) -> None:
        super().__init__(message)
        self.line = line


class YamlLimitError(YamlSyntaxError):
    """The text is YAML but would cost too much to build (aliases, nesting)."""


@dataclass
class Located:
    """Plain data (dicts, lists, scalars) with the line of every path in it."""

    data: Any
    lines: dict[KeyPath, int] = field(default_factory=dict)
    # Each repeated key (its path, its line, the line of the first one); the first one is kept.
    duplicates: list[tuple[KeyPath, int, int]] = field(default_factory=list)
    # Paths written outside the text, with their place: a job declared in Python
    # (``("jobs", "digest")`` -> ``proj/jobs.py:12``), and so everything under it.
    outside: dict[KeyPath, str] = field(default_factory=dict)

    def line(self, path: KeyPath) -> int | None:
        """The line of ``path``, else of its nearest ancestor that has one (None for a
        path written outside the text)."""
        if self._outside(path) is not None:
            return None
        for end in range(len(path), 0, -1):
            found = self.lines.get(path[:end])
            if found is not None:
                return found
        return None

    def place(self, source: str, path: KeyPath) -> tuple[str, int]:
        """Where ``path`` is written, ``source:line`` (``source``, the text's name, when
        no line is known) or its place outside the text; and the line to sort it by (what
        is outside sorts after the text, in the order it was added)."""
        outside = self._outside(path)
        if outside is not None:
            return outside, OUTSIDE
        line = self.line(path)
        return (f"{source}:{line}" if line else source), line or 0

    def _outside(self, path: KeyPath) -> str | None:
        if not self.outside:
            return None
        return next((self.outside[path[:end]] for end in range(len(path), 0, -1)
                     if path[:end] in self.outside), None)


#: The line a place outside the text sorts at: after every line of it.
OUTSIDE = 2**31


def load(text: str) -> Located:
    """Parse ``text``; raise :class:`YamlSyntaxError` if it is not YAML, or
    :class:`YamlLimitError` if building it would cost too much."""
    loader = _Loader(text)
    try:
        root = loader.get_single_node()
    except RecursionError:
        raise YamlLimitError("nested too deeply", None) from None
    except yaml.YAMLError as exc:
        raise _syntax_error(exc, text) from None
    finally:
        loader.dispose()
    located = Located(data=None)
    if root is not None:
        written = _written(root)
        extra = min(ALIAS_NODES + ALIAS_FACTOR * written, ALIAS_NODES_MAX)
        builder = _Builder(located, loader.aliases, written + extra)
        try:
            located.data = builder.build(root, ())
        except RecursionError:
            raise YamlLimitError("nested too deeply", None) from None
    return located


class _Loader(yaml.SafeLoader):
    """Also notes the line of every alias: the composed graph keeps only its anchor's."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        # (id of the parent node, item index or id of the item's key node) -> line
        self.aliases: dict[tuple[int, int], int] = {}

    def compose_node(self, parent: Node | None, index: Any) -> Node | None:
        if index is not None and self.check_event(yaml.AliasEvent):
            slot = index if isinstance(index, int) else id(index)
            self.aliases[(id(parent), slot)] = self.peek_event().start_mark.line + 1
        return super().compose_node(parent, index)  # type: ignore[no-any-return]


def _written(root: Node) -> int:
    """Nodes in the text: each node of the composed graph once, however often aliased."""
    seen: set[int] = set()
    todo = [root]
    while todo:
        node = todo.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, MappingNode):
            todo.extend(part for pair in node.value for part in pair)
        elif isinstance(node, SequenceNode):
            todo.extend(node.value)
    return len(seen)


class _Builder:
    def __init__(self, located: Located, aliases: dict[tuple[int, int], int],
                 budget: int) -> None:
        self.located = located
        self.aliases = aliases
        # The stock constructor still turns scalars into ints, bools, dates...
        self.constructor = yaml.constructor.SafeConstructor()
        self.limit = self.budget = budget  # nodes the whole file may build, nodes left
        self.open: set[int] = set()  # collections being built: an alias to one is a cycle
        self.site: int | None = None  # line of the outermost alias being expanded

    def build(self, node: Node, path: KeyPath, alias: int | None = None) -> Any:
        """``node`` as plain data; ``alias`` is the line of the alias naming it here."""
        self.budget -= 1
        if self.budget < 0:
            raise YamlLimitError(
                f"too many YAML aliases: expanding them builds more than {self.limit:,} "
                "values (an alias bomb?)", self.site or self.located.line(path))
        if isinstance(node, ScalarNode):
            try:
                return self.constructor.construct_object(node, deep=True)
            except (ValueError, OverflowError):
                # A scalar YAML reads as an impossible date (2026-13-01) stays its text, and
                # the field that gets it says what is wrong with it.
                return node.value
        if id(node) in self.open:
            raise YamlLimitError("a YAML alias refers to a block that contains it",
                                 alias or self.located.line(path))
        outer = self.site
        self.site = outer or alias
        self.open.add(id(node))
        try:
            if isinstance(node, MappingNode):
                return self._mapping(node, path)
            assert isinstance(node, SequenceNode)
            return [self._item(node, i, child, path + (i,)) for i, child in enumerate(node.value)]
        finally:
            self.open.discard(id(node))
            self.site = outer

    def _item(self, parent: Node, index: int, node: Node, path: KeyPath) -> Any:
        alias = self.aliases.get((id(parent), index))
        self.located.lines.setdefault(path, alias or node.start_mark.line + 1)
        return self.build(node, path, alias)

    def _mapping(self, node: MappingNode, path: KeyPath) -> dict[Any, Any]:
        result: dict[Any, Any] = {}
        merged: dict[Any, Any] = {}
        first_line: dict[Any, int] = {}
        for key_node, value_node in node.value:
            alias = self.aliases.get((id(node), id(key_node)))
            if key_node.tag == _MERGE_TAG:
                # `<<: *anchor` fills in keys the mapping does not set itself.
                sources = ([(s, self.aliases.get((id(value_node), i)))
                            for i, s in enumerate(value_node.value)]
                           if isinstance(value_node, SequenceNode) else [(value_node, alias)])
                for source, line in sources:
                    built = self.build(source, path, line)
                    if isinstance(built, dict):
                        merged = {**built, **merged}
                continue
            key = self.build(key_node, path)
            if not isinstance(key, str | int | float | bool) and key is not None:
                key = str(key)
            line = key_node.start_mark.line + 1
            if key in first_line:
                # Keep the first: its lines are the ones recorded, so its problems read true.
                self.located.duplicates.append((path + (key,), line, first_line[key]))
                continue
            first_line[key] = line
            self.located.lines[path + (key,)] = line
            result[key] = self.build(value_node, path + (key,), alias)
        return {**merged, **result}


def load_all(text: str) -> list[Located]:
    """Each document of a stream (``---`` between them), its lines counted in the whole
    text; the same errors as :func:`load`. Manifests come several to a file."""
    bounds: list[tuple[int, int, int]] = []  # first line (0-based), start, end of each
    try:
        for event in yaml.parse(text, Loader=yaml.SafeLoader):
            start, end = event.start_mark, event.end_mark
            if isinstance(event, yaml.DocumentStartEvent) and start is not None:
                bounds.append((start.line, start.index - start.column, len(text)))
            elif isinstance(event, yaml.DocumentEndEvent) and bounds and end is not None:
                bounds[-1] = (*bounds[-1][:2], end.index)
    except yaml.YAMLError as exc:
        raise _syntax_error(exc, text) from None
    # Blank lines in front keep each document's lines those of the whole text.
    return [load("\n" * line + text[start:end]) for line, start, end in bounds]


# A plain value YAML reads as something else: `*` starts an alias, `@` is reserved.
_UNQUOTED = re.compile(r"([\w-]+):[ \t]+([*@][^#\n]*?)[ \t]*(?:#.*)?$")
_UNQUOTED_FLOW = re.compile(r"([\w-]+):[ \t]+([*@][^#,}\n]*?)[ \t]*(?:[,}#]|$)")


def _syntax_error(exc: yaml.YAMLError, text: str) -> YamlSyntaxError:
    """PyYAML's error as one message and its line, when it has one; with how to quote a
    value on that line that needs it (``cron: */5 * * * *``)."""
    if isinstance(exc, yaml.MarkedYAMLError):
        mark = exc.problem_mark or exc.context_mark
        problem = exc.problem or exc.context or "invalid YAML"
        if mark is not None:
            problem += _quote_hint(text.splitlines()[mark.line:mark.line + 1])
        return YamlSyntaxError(problem, mark.line + 1 if mark else None)
    return YamlSyntaxError(str(exc), None)


def _quote_hint(line: list[str]) -> str:
    """How to quote a value of ``line`` that starts with ``*`` or ``@`` (``cron: "@daily"``),
    when it holds one unquoted; else nothing."""
    pattern = _UNQUOTED_FLOW if line and "{" in line[0] else _UNQUOTED
    found = pattern.search(line[0]) if line else None
    if found is None:
        return ""
    key, value = found.groups()
    why = "or YAML reads an alias" if value[0] == "*" else "YAML reserves @"
    return f" (quote a value starting with {value[0]}, {why}: {key}: {json.dumps(value)})"
