"""The environment of the processes a test starts: they import what the test imports.

Workers import a ``call`` job's function by its dotted path, so a fleet started from a
test must see the test's project on its ``PYTHONPATH``, wherever the test runs.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable
from pathlib import Path


def import_path(first: Iterable[str | os.PathLike[str]] = ()) -> str:
    """``PYTHONPATH`` for a child: ``first``, then each directory this process imports
    from that the interpreter would not find alone (neither the standard library nor
    site-packages), then the inherited ``PYTHONPATH``."""
    own = {Path(p).resolve() for p in (sys.prefix, sys.base_prefix, sys.exec_prefix)}
    entries = [str(p) for p in first]
    for entry in sys.path:
        path = Path(entry or os.getcwd()).resolve()
        if path.is_dir() and not own.intersection((path, *path.parents)):
            entries.append(str(path))
    entries.extend(p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p)
    return os.pathsep.join(dict.fromkeys(entries))


def child_env(first: Iterable[str | os.PathLike[str]] = (), **extra: str) -> dict[str, str]:
    """This process's environment, with ``PYTHONPATH`` from :func:`import_path` (of
    ``first``) and the variables ``extra``."""
    return {**os.environ, "PYTHONPATH": import_path(first), **extra}
