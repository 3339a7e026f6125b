"""``cronsvc show FIRE --follow``: a fire's output as its runs print it, then its outcome.

It reads the fire's live stream (what workers write while a command runs, see
:mod:`cronsvc.worker.live`) every :data:`LOOK_EVERY` seconds, and the fire's place: queued,
running, or over. A retry is followed too. Once the fire is done or dead it prints each
attempt as ``show`` does (with the output of a run that ended before it streamed) and
exits 0 if the last attempt succeeded, 1 if not.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from cronsvc.cli.term import echo
from cronsvc.errors import UnknownFire

if TYPE_CHECKING:
    from cronsvc.client.client import Client

LOOK_EVERY = 0.2  # seconds between two reads of the stream and the fire's place
OVER = ("done", "dead")


def follow(client: Client, fid: str) -> int:
    """Print the output of fire ``fid`` as it comes, then its attempts; the exit code."""
    from cronsvc.cli import render

    view = client.fire(fid)
    if view.state == "unknown":
        raise UnknownFire(f"no such fire: {fid} (not queued, running, dead nor in history)")
    zone = client.zones().get(view.job, "UTC")
    _say(f"{fid}: following ({view.state}); Ctrl-C stops following, not the fire")
    after, attempt, line_open = "0-0", None, False
    streamed: set[int] = set()
    while True:
        chunks = client.live_output(fid, after)
        for chunk in chunks:
            after = chunk.id
            if chunk.attempt != attempt:
                attempt = chunk.attempt
                _say(("\n" if line_open else "") + f"-- attempt {attempt}")
                line_open = False
            streamed.add(chunk.attempt)
            if chunk.text:
                echo(chunk.text, nl=False)
                line_open = not chunk.text.endswith("\n")
        if not chunks:
            view = client.fire(fid)
            if view.state in OVER:
                break
            time.sleep(LOOK_EVERY)
    # A run that ended before it streamed shows its stored output with its attempt.
    text = render.fire(view, client.server_ms(), zone, quiet=streamed)
    echo(("\n" if line_open else "") + text)
    last = next((a for a in reversed(view.attempts) if a.get("status") != "dead"), None)
    return 0 if view.state == "done" and last is not None and last.get("status") == "ok" else 1


def _say(line: str) -> None:
    echo(line)
