"""Load YAML into plain data while keeping the line of every key.

PyYAML's loaders forget where a value came from and silently keep the last of
two equal keys. Error messages must name the line, and a duplicated job name
must be an error, so this module composes the node tree and builds the data
itself: a side table maps each path (``("jobs", "backup", "cron")``) to the
1-based line of its key (or of its item in a list).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

KeyPath = tuple[str | int, ...]

_MERGE_TAG = "tag:yaml.org,2002:merge"


class YamlSyntaxError(Exception):
    """The text is not YAML; ``line`` is 1-based, or None when PyYAML gives no mark."""

    def __init__(self, message: str, line: int | None) -> None:
        super().__init__(message)
        self.line = line


@dataclass
class Located:
    """Plain data (dicts, lists, scalars) with the line of every path in it."""

    data: Any
    lines: dict[KeyPath, int] = field(default_factory=dict)
    # Each repeated key (its path, its line, the line of the first one); the first one is kept.
    duplicates: list[tuple[KeyPath, int, int]] = field(default_factory=list)

    def line(self, path: KeyPath) -> int | None:
        """The line of ``path``, else of its nearest ancestor that has one."""
        for end in range(len(path), 0, -1):
            found = self.lines.get(path[:end])
            if found is not None:
                return found
        return None


def load(text: str) -> Located:
    """Parse ``text``; raise :class:`YamlSyntaxError` if it is not YAML."""
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        problem = exc.problem or exc.context or "invalid YAML"
        raise YamlSyntaxError(problem, mark.line + 1 if mark else None) from None
    except yaml.YAMLError as exc:
        raise YamlSyntaxError(str(exc), None) from None
    located = Located(data=None)
    if root is not None:
        located.data = _Builder(located).build(root, ())
    return located


class _Builder:
    def __init__(self, located: Located) -> None:
        self.located = located
        # The stock constructor still turns scalars into ints, bools, dates...
        self.constructor = yaml.constructor.SafeConstructor()

    def build(self, node: Node, path: KeyPath) -> Any:
        if isinstance(node, MappingNode):
            return self._mapping(node, path)
        if isinstance(node, SequenceNode):
            return [self._item(child, path + (i,)) for i, child in enumerate(node.value)]
        assert isinstance(node, ScalarNode)
        return self.constructor.construct_object(node, deep=True)

    def _item(self, node: Node, path: KeyPath) -> Any:
        self.located.lines.setdefault(path, node.start_mark.line + 1)
        return self.build(node, path)

    def _mapping(self, node: MappingNode, path: KeyPath) -> dict[Any, Any]:
        result: dict[Any, Any] = {}
        merged: dict[Any, Any] = {}
        first_line: dict[Any, int] = {}
        for key_node, value_node in node.value:
            if key_node.tag == _MERGE_TAG:
                # `<<: *anchor` fills in keys the mapping does not set itself.
                sources = value_node.value if isinstance(value_node, SequenceNode) else [value_node]
                for source in sources:
                    built = self.build(source, path)
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
            result[key] = self.build(value_node, path + (key,))
        return {**merged, **result}
