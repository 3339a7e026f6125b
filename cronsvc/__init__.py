"""cronsvc: distributed cron on Redis."""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"

__all__ = ["Client", "__version__"]


def __getattr__(name: str) -> Any:
    # `from cronsvc import Client` without importing redis for `cronsvc --version`.
    if name == "Client":
        from .client import Client

        return Client
    raise AttributeError(name)
