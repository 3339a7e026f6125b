"""Sizes as people write them: ``65536``, ``512KiB``, ``64k``, ``1MiB``, ``2M``; and as
they read them: ``12.5 MiB``. ``k``, ``kb`` and ``kib`` all mean 1024 bytes."""

from __future__ import annotations

import re

_SIZE = re.compile(r"(\d+)\s*(b|k|kb|kib|m|mb|mib|g|gb|gib)?", re.IGNORECASE)
_UNITS = {"": 1, "b": 1, "k": 1024, "kb": 1024, "kib": 1024, "m": 2**20, "mb": 2**20,
          "mib": 2**20, "g": 2**30, "gb": 2**30, "gib": 2**30}

HINT = "bytes, or a size such as 64KiB or 1MiB"


def parse_size(value: object) -> int:
    """Bytes in ``value`` (a whole number, or text with a unit); ValueError with a plain
    message if it is not a size."""
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    match = _SIZE.fullmatch(value.strip()) if isinstance(value, str) else None
    if match is None:
        raise ValueError(f"not a size: expected {HINT}")
    return int(match[1]) * _UNITS[(match[2] or "").lower()]


def format_size(n: int) -> str:
    """``512 B``, ``4.0 KiB``, ``12.5 MiB``, ``1.2 GiB``."""
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} B"
