"""Sizes as people write them: ``512``, ``4KiB``, ``64KiB``, ``1MiB``, ``10kB``, ``2MB``."""

from __future__ import annotations

import re

_UNITS = {"": 1, "b": 1, "kb": 1000, "kib": 1024, "k": 1024, "mb": 1000**2,
          "mib": 1024**2, "m": 1024**2, "gb": 1000**3, "gib": 1024**3, "g": 1024**3}
_SIZE = re.compile(r"(\d+(?:\.\d+)?)\s*([a-z]*)")

HINT = "use e.g. 4096, 4KiB, 64KiB or 1MiB"


def parse_size(value: object) -> int:
    """Bytes in ``value``; raise ValueError with a plain message if it is not a size."""
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise ValueError(f"not a size ({HINT})")
    if isinstance(value, str):
        found = _SIZE.fullmatch(value.strip().lower())
        if found is None or found.group(2) not in _UNITS:
            raise ValueError(f"not a size ({HINT})")
        size = float(found.group(1)) * _UNITS[found.group(2)]
    else:
        size = float(value)
    if size != size or size in (float("inf"), float("-inf")) or size < 0:
        raise ValueError(f"not a size ({HINT})")
    return int(size)


def format_size(size: int) -> str:
    """``size`` bytes in the largest binary unit that holds it with one decimal at most:
    ``512B``, ``4KiB``, ``1.5MiB``."""
    for unit, step in (("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024)):
        if size >= step:
            return f"{size / step:.1f}".removesuffix(".0") + unit
    return f"{size}B"
