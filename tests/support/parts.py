"""A real part a test needs (redis-server, Chromium, a wheel build) that this machine lacks:
the test is skipped here, and fails under ``CI=true``, where every part must be present."""

from __future__ import annotations

import os
from typing import NoReturn

import pytest


def missing(why: str) -> NoReturn:
    """Skip the test, or fail it under ``CI=true``, saying ``why``."""
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI=true and {why}", pytrace=False)
    pytest.skip(why)
