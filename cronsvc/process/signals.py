"""Signal handlers that act in a thread of their own.

A Python signal handler runs in the main thread between two bytecodes, possibly
while that thread holds the lock of an ``Event`` it is waiting on. Setting that
same event from the handler would then deadlock (``threading`` locks are not
reentrant), so each handler only starts a short thread that does the work.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Mapping

Restore = Callable[[], None]


def handle_signals(actions: Mapping[int, Callable[[], None]]) -> Restore:
    """Run ``actions[sig]()`` in a new thread on each signal; return a function that
    puts the previous handlers back. Does nothing outside the main thread."""
    if threading.current_thread() is not threading.main_thread():
        return lambda: None

    def handler(action: Callable[[], None]) -> Callable[[int, object], None]:
        def handle(_signum: int, _frame: object) -> None:
            threading.Thread(target=action, name="cronsvc-signal", daemon=True).start()

        return handle

    old = {sig: signal.signal(sig, handler(action)) for sig, action in actions.items()}

    def restore() -> None:
        for sig, previous in old.items():
            signal.signal(sig, previous)

    return restore


def on_stop_signals(stop: Callable[[], None], reload: Callable[[], None] | None = None
                    ) -> Restore:
    """``stop()`` on SIGTERM and SIGINT (each signal calls it once more); ``reload()``
    on SIGHUP when given."""
    actions: dict[int, Callable[[], None]] = {signal.SIGTERM: stop, signal.SIGINT: stop}
    if reload is not None:
        actions[signal.SIGHUP] = reload
    return handle_signals(actions)
