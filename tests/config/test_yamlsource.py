"""Several YAML documents in one text, each with the lines of the whole text."""

from __future__ import annotations

import pytest

from cronsvc.config.yamlsource import YamlLimitError, YamlSyntaxError, load_all


def test_each_document_keeps_the_lines_of_the_whole_text() -> None:
    text = "# first\na: 1\n---\nkind: X\nspec:\n  b: 2\n---\n---\nc: [1,\n  2]\n"
    docs = load_all(text)
    assert [d.data for d in docs] == [{"a": 1}, {"kind": "X", "spec": {"b": 2}}, None,
                                      {"c": [1, 2]}]
    assert docs[1].line(("spec", "b")) == 6
    assert docs[3].line(("c", 1)) == 10
    assert load_all("") == []


def test_errors_name_the_line_and_limits_hold_per_document() -> None:
    with pytest.raises(YamlSyntaxError) as caught:
        load_all("a: 1\n---\nb: [1,\n")
    assert caught.value.line == 4
    bomb = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join([f'*{chr(97 + i)}'] * 9)}]\n"
        for i in range(8))
    with pytest.raises(YamlLimitError):
        load_all("ok: 1\n---\n" + bomb)
