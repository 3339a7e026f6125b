"""The fixture of the metrics tests: a Metrics object serving on a free port."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from cronsvc.metrics.counters import Metrics


@pytest.fixture
def metrics() -> Iterator[Metrics]:
    m = Metrics()
    m.serve(0, "127.0.0.1")
    yield m
    m.close()
