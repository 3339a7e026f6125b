"""Helpers the tests and the benchmarks share; fixtures live in ``tests/conftest.py``.

- :mod:`tests.support.paths`: the checkout (``ROOT``), the test data and the installed ``cronsvc``.
- :mod:`tests.support.wait`: polling with a deadline, and the Redis server's clock.
- :mod:`tests.support.servers`: the redis-server binary the tests run (or a skip).
- :mod:`tests.support.cluster`: a Redis Cluster of masters and a Sentinel.
- :mod:`tests.support.fleet`: real planner and worker processes on one job file.
- :mod:`tests.support.jobs`: job functions that note each run in a ledger file.
- :mod:`tests.support.calls`: targets of ``call`` jobs run inside the test process.
- :mod:`tests.support.script_procs`: processes that hammer the Lua scripts at once.
- :mod:`tests.support.metrics`: reading a ``/metrics`` page.
- :mod:`tests.support.receivers`: real HTTP and SMTP servers that notifications go to.
- :mod:`tests.support.certs`: a CA and server certificates made in the test, for TLS.

Worker processes import :mod:`tests.support.jobs` and :mod:`tests.support.calls` by
dotted path, so this package imports nothing on its own.
"""
