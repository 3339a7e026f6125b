"""The worker process's cycle collector, set for a process that runs many short fires.

CPython collects its youngest objects every 700 net allocations of container objects and,
now and then, walks every object of the process in a full collection. A worker makes most
of its objects at its start (its job file's models, the modules its calls import), and a
fire makes a few dozen that reference counting frees at its end. With a claim's worth of
fires in flight (200 async calls), young collections find them alive and keep them, and
the full collections that follow walk everything loaded at the start again: 15-30 µs of a
no-op fire's CPU. So once started, a worker takes what it loaded out of the collector's
sight (``gc.freeze``) and collects young objects less often; garbage in cycles (which a
fire of the worker's own makes none of) is still collected.
"""

from __future__ import annotations

import gc

#: Net allocations of container objects between two young collections (CPython's: 700).
YOUNG = 10_000


def settle() -> None:
    """Collect what starting made, then keep the survivors out of later collections."""
    gc.collect()
    gc.freeze()
    _, middle, old = gc.get_threshold()
    gc.set_threshold(YOUNG, middle, old)
