"""The run a piece of job code is in, as that code sees it: the fire's context
(``cronsvc.current()``), the event ``cronsvc.stopping()`` reads and the output its prints
and log records go to (:mod:`cronsvc.run.capture`).

One context variable holds the three: a call sets and resets it once around the user's
function (three variables cost three sets and three resets a fire). Outside a run it is
:data:`NOWHERE`, whose fields are all None.
"""

from __future__ import annotations

import contextvars
import threading
from typing import Any, NamedTuple

from cronsvc.run.output import Kept


class InRun(NamedTuple):
    """What the code of a run sees of it; None where it has none."""

    fire: Any  # a cronsvc.run.context.FireContext (which imports this module) or None
    stop: threading.Event | None
    output: Kept | None


NOWHERE = InRun(None, None, None)
RUN: contextvars.ContextVar[InRun] = contextvars.ContextVar("cronsvc_run", default=NOWHERE)
