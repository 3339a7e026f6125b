"""The Markdown of the repository names only what exists.

Every repository path a page names (in backticks, in a code block, or as a link) is a
file or folder of the checkout; ``path:name`` names something ``path`` defines; links
between pages resolve, and a link's ``#anchor`` is a heading of its page (GitHub's
slugs). A file moved, renamed or deleted fails here with the page and line that still
name it.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest

from tests.support.paths import ROOT

#: Folders whose Markdown is not the project's own.
SKIPPED = {".git", ".venv", ".venv-arq", ".venv-latest", "node_modules", ".pytest_cache",
           ".cronsvc", "build", "dist"}
#: What a repository path named in backticks or a code block starts with.
REPO_DIRS = ("cronsvc/", "lua/", "tests/", "bench/", "docs/", "deploy/")
#: Paths relative to the page itself (from docs/: ``../cronsvc/x.py``, ``img/x.png``).
RELATIVE = ("../", "img/")
#: A token that is a pattern, not one path: ``lua/<verb>-<numkeys>.lua``, ``tests/*.py``.
PLACEHOLDER = re.compile(r"[<>*{}?]|\.\.\.|…")
FENCE = re.compile(r"^\s{0,3}(?:[-*+]\s+|\d+\.\s+)?(`{3,}|~{3,})")
HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
CODE_SPAN = re.compile(r"(?<!`)(`+)(?!`)([\s\S]+?)(?<!`)\1(?!`)")
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
HTML_ANCHOR = re.compile(r"<a\s+(?:name|id)=\"([^\"]+)\"")
SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")
TOKEN_SPLIT = re.compile(r"[\s'\"(),;=\[\]]+")


@dataclass(frozen=True)
class Line:
    number: int
    text: str
    in_code: bool  # inside a fenced code block


def markdown_files(root: Path = ROOT) -> list[Path]:
    """Every ``*.md`` of the checkout, but those of venvs and installed packages."""
    return sorted(p for p in root.rglob("*.md")
                  if not SKIPPED.intersection(p.relative_to(root).parts[:-1]))


def lines_of(text: str) -> Iterator[Line]:
    """The lines of a page, each marked inside a fenced code block or not (the fences
    themselves count as code)."""
    fence: str | None = None
    for number, raw in enumerate(text.splitlines(), 1):
        m = FENCE.match(raw)
        if fence is None and m:
            fence = m.group(1)
            yield Line(number, raw, True)
        elif fence is not None:
            closing = raw.strip()
            if closing.startswith(fence[0] * len(fence)) and not closing.strip(fence[0]):
                fence = None
            yield Line(number, raw, True)
        else:
            yield Line(number, raw, False)


def plain(heading: str) -> str:
    """A heading's text as GitHub renders it: links by their text, no code marks or tags."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)
    text = re.sub(r"<[^>]+>", "", text)
    return text.replace("`", "")


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation but ``-`` and ``_`` dropped,
    each space a hyphen."""
    return re.sub(r"[^\w\- ]", "", plain(heading).strip().lower()).replace(" ", "-")


def anchors(text: str) -> set[str]:
    """The anchors of a page: its headings' slugs (a repeated one gets ``-1``, ``-2``...)
    and HTML ``<a name=...>``/``<a id=...>``."""
    seen: dict[str, int] = {}
    found: set[str] = set()
    for line in lines_of(text):
        if line.in_code:
            continue
        found.update(HTML_ANCHOR.findall(line.text))
        m = HEADING.match(line.text)
        if m is None:
            continue
        base = slug(m.group(2))
        n = seen.get(base, 0)
        seen[base] = n + 1
        found.add(base if n == 0 else f"{base}-{n}")
    return found


@cache
def anchors_of(page: Path) -> frozenset[str]:
    return frozenset(anchors(page.read_text(encoding="utf-8")))


@cache
def names_in(path: Path) -> frozenset[str]:
    """What a file defines: a Python file's functions, classes and assigned names at any
    depth (methods as ``Class.method`` too); any other file, every word it holds."""
    text = path.read_text(encoding="utf-8", errors="replace")
    if path.suffix != ".py":
        return frozenset(re.findall(r"[A-Za-z_][\w.]*", text))
    names: set[str] = set()

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                names.update({child.name, prefix + child.name})
                visit(child, prefix + child.name + ".")
            else:
                if isinstance(child, ast.Assign | ast.AnnAssign):
                    targets = child.targets if isinstance(child, ast.Assign) else [child.target]
                    names.update(prefix + t.id for t in targets if isinstance(t, ast.Name))
                visit(child, prefix)

    visit(ast.parse(text), "")
    return frozenset(names)


def path_tokens(text: str) -> Iterator[str]:
    """The words of a code span or code line that look like repository paths."""
    for token in TOKEN_SPLIT.split(text):
        token = token.rstrip(".,:;")
        if token.startswith(REPO_DIRS + RELATIVE) and not PLACEHOLDER.search(token):
            yield token


def check_path(page: Path, token: str, root: Path) -> str | None:
    """Why ``token``, named on ``page``, is no path of the checkout (None: it is one).
    ``path:name`` must name something the file defines; ``path#anchor`` is checked as a
    link's anchor is."""
    token, _, anchor = token.partition("#")
    path, _, name = token.partition(":")
    base = page.parent if path.startswith(RELATIVE) else root
    target = (base / path).resolve()
    if not target.is_relative_to(root.resolve()):
        return f"{token}: outside the repository"
    if not target.exists():
        return f"{path}: no such file or folder"
    if name and not name.isdigit() and target.is_file() and name not in names_in(target):
        return f"{path}: defines no {name!r}"
    if anchor and target.suffix == ".md" and anchor not in anchors_of(target):
        return f"{path}#{anchor}: no such heading in {path}"
    return None


def check_link(page: Path, target: str, root: Path, own: frozenset[str]) -> str | None:
    """Why a link's target does not resolve from ``page`` (None: it does)."""
    if SCHEME.match(target):
        return None  # http(s), mailto: not checked here
    path, _, anchor = target.partition("#")
    if not path:
        return None if anchor in own else f"#{anchor}: no such heading on this page"
    resolved = (page.parent / path).resolve()
    if not resolved.is_relative_to(root.resolve()):
        return f"{target}: outside the repository"
    if not resolved.exists():
        return f"{path}: no such file or folder (from {page.parent.relative_to(root) or '.'})"
    if anchor and resolved.suffix == ".md" and anchor not in anchors_of(resolved):
        return f"{target}: no such heading in {resolved.relative_to(root)}"
    return None


def paragraphs(text: str) -> Iterator[tuple[int, str, bool]]:
    """``(first line, text, in code)``: each line of a code block alone, and each run of
    prose lines together, so a code span or a link broken over two lines stays whole."""
    run: list[Line] = []
    for line in [*lines_of(text), Line(0, "", False)]:
        if not line.in_code and line.text.strip():
            run.append(line)
            continue
        if run:
            yield run[0].number, "\n".join(x.text for x in run), False
            run = []
        if line.in_code:
            yield line.number, line.text, True


def problems(page: Path, text: str | None = None, root: Path = ROOT) -> list[str]:
    """``line: why`` for each path, link or anchor of ``page`` that does not resolve."""
    text = page.read_text(encoding="utf-8") if text is None else text
    own = frozenset(anchors(text))
    found: list[str] = []
    for first, block, in_code in paragraphs(text):
        why: list[tuple[int, str | None]] = []
        if in_code:
            why += [(0, check_path(page, t, root)) for t in path_tokens(block)]
        else:
            for span in CODE_SPAN.finditer(block):
                at = block.count("\n", 0, span.start())
                why += [(at, check_path(page, t, root)) for t in path_tokens(span.group(2))]
            prose = CODE_SPAN.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), block)
            for link in LINK.finditer(prose):
                at = prose.count("\n", 0, link.start())
                why.append((at, check_link(page, link.group(1), root, own)))
        found += [f"{page.relative_to(root)}:{first + at}: {w}" for at, w in why if w]
    return found


PAGES = markdown_files()


def test_the_pages_are_found() -> None:
    names = {str(p.relative_to(ROOT)) for p in PAGES}
    assert {"README.md", "docs/README.md", "bench/REPORT.md"} <= names


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_every_path_and_link_of_a_page_exists(page: Path) -> None:
    found = problems(page)
    assert not found, "what the page names does not resolve:\n" + "\n".join(found)


def test_a_made_up_path_link_or_anchor_fails() -> None:
    page = ROOT / "docs" / "made-up.md"  # never written: only its text is checked
    text = "\n".join([
        "# A page",
        "The claim loop is `cronsvc/worker/claimer.py`; see [the script](../lua/claim-99.lua).",
        "`cronsvc/worker/worker.py:claim_twice` and [Semantics](semantics.md#no-such-part).",
        "[Up](#a-page), [down](#nowhere), ![shot](img/nothing.png), `lua/plan-3.lua`,",
        "`cronsvc/worker/leases.py:Leases.renew_loop`, and a span broken over two lines:",
        "`cronsvc/worker/worker.py:Worker.claim_once and",
        "tests/no_such_test.py`.",
        "```sh",
        ".venv/bin/python bench/no_such_bench.py",
        "```",
    ])
    assert sorted(problems(page, text)) == sorted([
        "docs/made-up.md:2: cronsvc/worker/claimer.py: no such file or folder",
        "docs/made-up.md:2: ../lua/claim-99.lua: no such file or folder (from docs)",
        "docs/made-up.md:3: cronsvc/worker/worker.py: defines no 'claim_twice'",
        "docs/made-up.md:3: semantics.md#no-such-part: no such heading in docs/semantics.md",
        "docs/made-up.md:4: #nowhere: no such heading on this page",
        "docs/made-up.md:4: img/nothing.png: no such file or folder (from docs)",
        "docs/made-up.md:6: tests/no_such_test.py: no such file or folder",
        "docs/made-up.md:9: bench/no_such_bench.py: no such file or folder",
    ])


def test_slugs_are_githubs() -> None:
    assert slug("Operating a fleet: `cronsvc.Client` and the operator commands") == (
        "operating-a-fleet-cronsvcclient-and-the-operator-commands")
    assert slug("Performance and guarantees") == "performance-and-guarantees"
    assert slug("What a request may cost") == "what-a-request-may-cost"
    assert anchors("# A\n## Notes\n```\n# not a heading\n```\n## Notes\n") == {
        "a", "notes", "notes-1"}


def test_the_docs_index_lists_every_page() -> None:
    index = ROOT / "docs" / "README.md"
    linked = {(index.parent / t.partition("#")[0]).resolve()
              for t in LINK.findall(index.read_text(encoding="utf-8"))
              if not SCHEME.match(t) and t.partition("#")[0]}
    pages = {p.resolve() for p in (ROOT / "docs").glob("*.md") if p.name != "README.md"}
    missing = sorted(p.name for p in pages - linked)
    assert not missing, f"docs/README.md does not list {', '.join(missing)}"


def test_the_readme_opens_with_what_it_is_then_the_quickstart() -> None:
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert lines[0].startswith("# ")
    headings = [i for i, line in enumerate(lines) if line.startswith("## ")]
    intro = "\n".join(lines[1:headings[0]]).strip()
    assert intro, "a paragraph on what cronsvc is comes first"
    assert "\n\n" not in intro and not intro.startswith(("#", "```", "|", "-", "!")), (
        "one paragraph, before anything else")
    assert lines[headings[0]] == "## Quickstart"
    body = lines[headings[0] + 1:headings[1]]
    start = next(i for i, line in enumerate(body) if line.startswith("```"))
    end = next(i for i, line in enumerate(body) if i > start and line.startswith("```"))
    commands = [line.split("#")[0].strip() for line in body[start + 1:end]]
    assert commands[:2] == ["make run", "make test"]


@pytest.mark.parametrize("page", markdown_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_page_keeps_a_merge_conflict(page: Path) -> None:
    marks = [n for n, line in enumerate(page.read_text().splitlines(), 1)
             if line.startswith(("<<<<<<< ", ">>>>>>> ")) or line == "======="]
    assert not marks, f"{page.relative_to(ROOT)}: conflict markers on lines {marks}"
    fences = [line for line in page.read_text().splitlines() if line.startswith("```")]
    assert len(fences) % 2 == 0, f"{page.relative_to(ROOT)}: a code block is never closed"
