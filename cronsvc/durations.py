"""Durations as people write them: ``30s``, ``5m``, ``2h``, ``1d``, ``1h30m``, or seconds;
and as people read them (:func:`spoken`: ``1 h``, ``2 min 5 s``), for pages and messages."""

from __future__ import annotations

import re

_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
# "ms" comes first so that "500ms" is not read as 500 minutes and a stray "s".
_PART = r"(\d+(?:\.\d+)?)(ms|s|m|h|d)"
_WHOLE = re.compile(rf"(?:{_PART})+")
_PARTS = re.compile(_PART)

HINT = "use e.g. 30s, 5m, 2h, 1d, 1h30m or a number of seconds"


def parse_duration(value: object, *, allow_zero: bool = False) -> float:
    """Seconds in ``value``; raise ValueError with a plain message if it is not a duration.

    Zero is refused unless ``allow_zero``; negative durations always are.
    """
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise ValueError(f"not a duration ({HINT})")
    if isinstance(value, str):
        text = value.strip().lower().replace(" ", "")
        try:
            seconds = float(text)
        except ValueError:
            if not _WHOLE.fullmatch(text):
                raise ValueError(f"not a duration ({HINT})") from None
            seconds = sum(float(n) * _UNITS[unit] for n, unit in _PARTS.findall(text))
    else:
        seconds = float(value)
    if seconds != seconds or seconds in (float("inf"), float("-inf")):
        raise ValueError(f"not a duration ({HINT})")
    if seconds < 0 or (seconds == 0 and not allow_zero):
        raise ValueError("must be positive" if not allow_zero else "must not be negative")
    return seconds


def format_duration(ms: int) -> str:
    """``ms`` in the largest unit that holds it whole: ``90m``, ``2h``, ``1d``, ``1.5s``."""
    if ms <= 0 or ms % 1000:
        return f"{ms / 1000:g}s" if ms % 1000 else "0s"
    seconds = ms // 1000
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds % size == 0:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


_SPOKEN = (("d", 86_400_000), ("h", 3_600_000), ("min", 60_000), ("s", 1000))


def spoken(ms: int | float) -> str:
    """``ms`` as a page or a message says it: in at most two units, the larger first,
    ``850 ms``, ``3.2 s``, ``20 s``, ``2 min 5 s``, ``1 h``, ``1 h 30 min``, ``2 d 3 h``;
    tenths of a second below ten seconds, whole seconds above."""
    ms = abs(round(ms))
    if ms < 1000:
        return f"{ms} ms"
    tenths = round(ms / 100)
    if tenths < 100 and tenths % 10:
        return f"{tenths / 10:.1f} s"
    ms = round(ms / 1000) * 1000
    i = next(i for i, (_, size) in enumerate(_SPOKEN) if ms >= size)
    unit, size = _SPOKEN[i]
    text = f"{ms // size} {unit}"
    if i + 1 < len(_SPOKEN) and ms % size >= _SPOKEN[i + 1][1]:
        small, small_size = _SPOKEN[i + 1]
        text += f" {ms % size // small_size} {small}"
    return text
