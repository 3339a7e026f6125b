"""What the tasks of `bench/dispatch.py` note as they start, in every queue library: when
(``time.time()``, their first act) and which fire (or, for a message of the library's
own enqueue loop, its id), one JSON line in ``CRONSVC_TEST_LEDGER``."""

from __future__ import annotations

import json
import os

import cronsvc


def note(started: float, own_id: str | None) -> None:
    """The line of a task that started at ``started``: its fire if cronsvc sent it
    (``cronsvc.current()``), else ``own_id``, the id its library gave the message."""
    ctx = cronsvc.current()
    line = json.dumps({"fire": ctx.fire_id if ctx else own_id, "started": started})
    with open(os.environ["CRONSVC_TEST_LEDGER"], "a") as f:
        f.write(line + "\n")
