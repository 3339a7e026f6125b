"""Every page on a 390 px phone, in a real headless Chromium against a real fleet: nothing
wider than the screen, every button and link on it, and no word broken a letter a line
(the jobs table once squeezed names and times to a letter per line and cut off its
buttons, while the page was no wider than the screen). One screenshot a page. And the
words the pages once got wrong: durations (``1 h``, not ``3600.0``), a zone after no
schedule, each worker's pools."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from cronsvc.client.client import Client
from cronsvc.testing import Fleet, WebServer
from tests.support.browser import shoot, watched
from tests.support.wait import wait_for

pytestmark = pytest.mark.slow
WIDTH = 390
LONG = "digest-for-a-customer-with-a-rather-long-name"
#: A cell narrower than this squeezes its words (a date, a name) to pieces.
NARROWEST_CELL = 100

#: What breaks the layout on this page, if anything: [problem, ...].
PROBLEMS = """(narrowest) => {
  const width = window.innerWidth, found = [];
  if (document.documentElement.scrollWidth > width) {
    found.push(`the page is ${document.documentElement.scrollWidth}px wide`);
  }
  const shown = e => e.getClientRects().length > 0 && getComputedStyle(e).visibility !== 'hidden';
  for (const e of document.querySelectorAll('main a, main button, header a, header button')) {
    const r = e.getBoundingClientRect();
    if (shown(e) && (r.left < 0 || r.right > width + 0.5)) {
      found.push(`${e.tagName} "${e.innerText}" spans ${r.left}..${r.right}px`);
    }
  }
  for (const e of document.querySelectorAll('main td')) {
    const r = e.getBoundingClientRect();
    if (shown(e) && e.innerText.trim() && r.width < narrowest) {
      found.push(`a cell "${e.innerText.slice(0, 30)}" is ${r.width}px wide`);
    }
  }
  for (const e of document.querySelectorAll('main time')) {
    if (shown(e) && e.getClientRects().length > 1) {
      found.push(`the time "${e.innerText}" takes ${e.getClientRects().length} lines`);
    }
  }
  return found;
}"""


@pytest.fixture
def fleet(tmp_path: Path, redis_url: str) -> Iterator[Fleet]:
    f = Fleet(tmp_path, redis_url, {})
    f.write({
        LONG: {"command": ["true"], "timeout": "2h",
               "description": "the weekly digest of one large customer", "tags": ["digest"]},
        "heartbeat": f.call_job("* * * * * *", description="proves the fleet is alive"),
        "flaky": {"cron": "*/2 * * * * *", "command": ["sh", "-c", "echo boom >&2; exit 3"],
                  "retries": 0, "description": "fails every time"},
    })
    with f.running("worker-1"):
        yield f


def test_every_page_fits_a_phone(browser: Any, tmp_path: Path, redis_url: str,
                                 fleet: Fleet) -> None:
    c = Client(fleet.redis_url, config=str(fleet.config))
    wait_for(lambda: len(c.published_jobs()) == 3, message="the planner to publish")
    sid = f"{LONG}:user-42"
    c.acting_as("web:phone").upsert_schedule(sid, job=LONG, every="20s",
                                              payload={"user": 42})
    c.trigger(LONG, {"user": 7})
    wait_for(lambda: c.dead("flaky"), timeout=30, message="a dead letter of flaky")
    wait_for(lambda: c.history(LONG, 5), timeout=30, message="a run of the long-named job")
    dead = c.dead("flaky")[0].fire
    pages = {"overview": "/", "jobs": "/jobs", "job": f"/jobs/{LONG}",
             "fire": f"/fires/{quote(dead, safe='')}", "fleet": "/fleet",
             "schedules": f"/schedules/{sid}", "audit": "/audit", "dead": "/dead",
             "schedule-new": f"/jobs/{LONG}/schedules/new", "run": f"/jobs/{LONG}/run"}
    with WebServer(tmp_path, redis_url, fleet.config) as web:
        page, errors = watched(browser, WIDTH, 844)
        found, text, cells = {}, {}, {}
        for name, path in pages.items():
            page.goto(f"{web.url}{path}")
            page.locator("body").wait_for()
            found[name] = page.evaluate(PROBLEMS, NARROWEST_CELL)
            text[name] = page.locator("main").inner_text()
            cells[name] = page.locator("main td[data-label]").evaluate_all(
                "cs => cs.map(c => c.dataset.label + ': ' + c.innerText)")
            shoot(page, tmp_path, f"{name}-phone")
        page.close()
    assert found == {name: [] for name in pages}
    assert errors == []

    # Durations in words, no zone after no schedule, each worker's pools.
    assert re.search(r"timeout\s+2 h\b", text["job"]), text["job"]
    assert "every 20 s" in text["job"] and "the last 1 runs" not in text["job"]
    assert re.search(r"the last (run|\d+ runs)", text["job"])
    assert "when triggered (no schedule)\n" in text["jobs"] and "· UTC" not in text["jobs"]
    assert "Pools: default" in cells["fleet"] and "Horizon: 2 h" in cells["fleet"], cells["fleet"]
