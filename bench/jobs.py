"""Job functions the benchmarks schedule: as cheap as a `call` job can be."""

from __future__ import annotations


def noop() -> None:
    """Do nothing: what is measured is the service around the job."""


async def async_noop() -> None:
    """Do nothing, awaited on the worker's event loop: the service around an async job."""
