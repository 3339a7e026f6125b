"""Job functions the benchmarks schedule: as cheap as a `call` job can be."""

from __future__ import annotations


def noop() -> None:
    """Do nothing: what is measured is the service around the job."""
