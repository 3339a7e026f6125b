"""cronsvc: distributed cron on Redis."""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"

__all__ = ["Client", "__version__", "current", "job", "stopping"]


def __getattr__(name: str) -> Any:
    # `from cronsvc import Client` without importing redis for `cronsvc --version`.
    if name == "Client":
        from cronsvc.client.client import Client

        return Client
    if name in ("current", "stopping"):  # for `call` jobs: the fire they run, and when to stop
        from cronsvc.run import context

        return getattr(context, name)
    if name == "job":  # @cronsvc.job(...): a job declared next to its function
        from cronsvc.config.declare import job

        return job
    raise AttributeError(name)
