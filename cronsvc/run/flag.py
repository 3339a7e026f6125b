"""A :class:`threading.Event` for each run: one per fire, and most are never waited on.

Making a ``threading.Event`` makes a ``Condition``, whose constructor looks for three
methods a plain lock lacks and catches an AttributeError for each: some 5 µs, more than
the rest of a no-op ``call`` fire's run. A :class:`Flag` makes its Condition when it is
first set, cleared or waited on; reading it (``is_set``, what a run asks) needs none.
"""

from __future__ import annotations

import threading

_making = threading.Lock()  # one Condition per Flag, whichever thread asks first


class Flag(threading.Event):
    """A ``threading.Event`` whose Condition is made on its first use."""

    # Not Event's __init__, which makes the Condition now: none in Python at all, the two
    # read from the class until first set (one is made per fire).
    __init__ = object.__init__  # type: ignore[assignment]
    _flag = False
    _made: threading.Condition | None = None

    @property
    def _cond(self) -> threading.Condition:  # type: ignore[override]
        made = self._made
        if made is None:
            with _making:
                if self._made is None:
                    self._made = threading.Condition(threading.Lock())
                made = self._made
        return made
