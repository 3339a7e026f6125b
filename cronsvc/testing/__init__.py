"""Test your job files end to end, against a real Redis and real cronsvc processes.

The harness cronsvc's own tests and benchmarks run on, for your tests of your jobs:

- :func:`redis_server` (:mod:`cronsvc.testing.redis`): a throwaway redis-server on a
  free loopback port; :func:`flushed` empties a shared one.
- :class:`Fleet` (:mod:`cronsvc.testing.fleet`): ``cronsvc planner`` and ``cronsvc
  worker`` processes on one job file; :func:`history` reads what each run ended as, and
  :func:`published` gives a Client on a file whose jobs are published.
- :mod:`cronsvc.testing.ledger`: job functions (``cronsvc.testing.ledger:record``,
  ``:block``) that note each run in a file, and :func:`read_ledger` that reads it.
- :func:`wait_for` and :func:`poll` (:mod:`cronsvc.testing.wait`): polling with a
  deadline; a deadline that passes raises :class:`WaitTimeout`, an ``AssertionError``.
- :class:`WebServer` (:mod:`cronsvc.testing.web`): a ``cronsvc web`` process.

None of it imports pytest. :mod:`cronsvc.testing.pytest_plugin`, which does, wraps the
above as the fixtures ``cronsvc_redis`` and ``cronsvc_fleet``. docs/testing.md shows a
test of a job from start to end.
"""

from cronsvc.testing.fleet import Fleet, history, published
from cronsvc.testing.ledger import BLOCK, RECORD, read_ledger
from cronsvc.testing.redis import flushed, redis_server
from cronsvc.testing.wait import SLOWDOWN, WaitTimeout, poll, wait_for
from cronsvc.testing.web import WebServer

__all__ = [
    "BLOCK",
    "RECORD",
    "SLOWDOWN",
    "Fleet",
    "WaitTimeout",
    "WebServer",
    "flushed",
    "history",
    "poll",
    "published",
    "read_ledger",
    "redis_server",
    "wait_for",
]
