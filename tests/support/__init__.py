"""Helpers only cronsvc's own tests use; fixtures live in ``tests/conftest.py``.

The harness the tests share with the benchmarks and with users' own tests (a fleet of
real processes, a throwaway redis-server, the ledger jobs, polling, the web server) is
the public :mod:`cronsvc.testing`.

- :mod:`tests.support.paths`: the checkout (``ROOT``), the test data and the installed ``cronsvc``.
- :mod:`tests.support.wait`: :func:`cronsvc.testing.wait_for` failing the test on a
  timeout, and the Redis server's clock.
- :mod:`tests.support.servers`: the redis-server binary the tests run (or a skip).
- :mod:`tests.support.parts`: a missing part skips a test, or fails it under ``CI=true``.
- :mod:`tests.support.cluster`: a Redis Cluster of masters and a Sentinel.
- :mod:`tests.support.jobs`: job functions only the tests run (tagged, failing, held runs).
- :mod:`tests.support.calls`: targets of ``call`` jobs run inside the test process.
- :mod:`tests.support.script_procs`: processes that hammer the Lua scripts at once.
- :mod:`tests.support.metrics`: reading a ``/metrics`` page.
- :mod:`tests.support.receivers`: real HTTP(S) and SMTP servers that notifications and
  `http` jobs go to.
- :mod:`tests.support.certs`: a CA and server certificates made in the test, for TLS.
- :mod:`tests.support.web`: an operator token and a job file of one job, for web tests.
- :mod:`tests.support.browser`: headless Chromium for the page tests.
- :mod:`tests.support.cli`: a finished CLI command's output or its one error line.

Worker processes import :mod:`tests.support.jobs` and :mod:`tests.support.calls` by
dotted path, so this package imports nothing on its own.
"""
