"""What Redis replies, as plain Python values; and JSON as cronsvc writes it to Redis.

A connection may or may not decode responses (a cluster client, a user's own
client), so every reader turns replies into ``str`` through :func:`text`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from cronsvc.history import encoded


def text(value: Any) -> str:
    """A reply as ``str``, whether the connection decodes responses or not."""
    return value.decode() if isinstance(value, bytes) else str(value)


def opt_text(value: Any) -> str | None:
    """:func:`text`, keeping a missing value (None) missing."""
    return None if value is None else text(value)


def texts(mapping: Mapping[Any, Any]) -> dict[str, str]:
    """A hash reply with ``str`` keys and values."""
    return {text(k): text(v) for k, v in mapping.items()}


def json_object(raw: Any) -> dict[str, Any] | None:
    """A JSON object stored in Redis, or None when it is missing or not an object."""
    try:
        value = json.loads(raw) if raw else None
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def integer(value: Any) -> int | None:
    """An integer stored in Redis, or None when it is missing or not one."""
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


# Made once: json.dumps with any option makes an encoder per call (a history record per
# run, a payload per fire).
_COMPACT = json.JSONEncoder(separators=(",", ":")).encode
_RECORD = json.JSONEncoder(separators=(",", ":"), default=str).encode


def compact(value: Any) -> str:
    """JSON without spaces: what cronsvc stores (a payload is always JSON, strings
    included, so that it decodes back as it was)."""
    return _COMPACT(value)


def record_json(record: Any) -> str:
    """A record as stored: text already encoded as it is, else :func:`compact` JSON with
    any value JSON has no type for written as its ``str``."""
    if isinstance(record, str | bytes):
        return text(record)
    return encoded(record) or _RECORD(record)
