"""Headless Chromium for the page tests: Debian's `chromium`, driven by Playwright.

Without chromium the tests skip with one line saying what to install, except under
``CI=true``, where a missing browser fails them.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.parts import missing

#: Flags that keep Chromium off the network it would call home on.
FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def chromium_path() -> str | None:
    return os.environ.get("CRONSVC_CHROMIUM") or shutil.which("chromium") or \
        shutil.which("chromium-browser")


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    path = chromium_path()
    if path is None:
        missing("chromium not found: install Debian's chromium (apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=path, headless=True, args=FLAGS)
        try:
            yield b
        finally:
            b.close()


def shoot(shown: Any, tmp_path: Path, name: str) -> None:
    """A screenshot of a page (all of it), or of one element (a Playwright locator), under
    the test's tmp dir; also into $CRONSVC_SCREENSHOTS if set (``CRONSVC_SCREENSHOTS=docs/img``
    renews the README's)."""
    shots = tmp_path / "screenshots"
    shots.mkdir(exist_ok=True)
    whole = {"full_page": True} if hasattr(shown, "goto") else {}
    shown.screenshot(path=str(shots / f"{name}.png"), **whole)
    if os.environ.get("CRONSVC_SCREENSHOTS"):
        shown.screenshot(path=str(Path(os.environ["CRONSVC_SCREENSHOTS"]) / f"{name}.png"))


def watched(browser: Any, width: int = 1280, height: int = 900) -> tuple[Any, list[str]]:
    """A new page of ``width`` x ``height``, and the list its script errors go to (a test
    ends by asserting it is empty)."""
    page = browser.new_page(viewport={"width": width, "height": height})
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    return page, errors
