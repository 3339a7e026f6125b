"""Which Redis to use when none is named: one rule for the CLI and :class:`cronsvc.Client`."""

from __future__ import annotations

import os

from cronsvc.process.up import read_embedded_url


def find_redis_url(given: str | None, in_file: str | None) -> str | None:
    """``given``, then ``$CRONSVC_REDIS_URL``, then ``in_file`` (redis.url of the job
    file), then the embedded server of a ``cronsvc up`` running in this directory; else
    None."""
    return given or os.environ.get("CRONSVC_REDIS_URL") or in_file or read_embedded_url()
