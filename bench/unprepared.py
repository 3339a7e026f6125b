"""``python -m bench.unprepared worker ...``: ``cronsvc worker`` that makes nothing ahead
(no kind's ``prepare``), as workers were before it: its first fire of a dispatching
job imports the queue library and connects. The reference of the first-fire figure of
`bench/dispatch.py`."""

from __future__ import annotations

import sys
from typing import Any

from cronsvc.cli.main import main
from cronsvc.kinds import KINDS


def _nothing(self: Any, job: Any) -> None:
    return None


if __name__ == "__main__":
    for kind in KINDS.values():
        type(kind).prepare = _nothing  # type: ignore[method-assign]
    sys.argv[0] = "cronsvc"
    main()
