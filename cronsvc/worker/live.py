"""A run's output while it goes: what ``cronsvc show FIRE --follow`` and the fire page read.

Each run gets a :class:`LiveFeed`, told every chunk its process or its call writes; it
joins the feeds the worker writes from at its first chunk, so a run that prints nothing
costs no more than the feed. One thread per worker writes what the feeds gathered, every
:data:`FLUSH_EVERY` seconds, in one pipeline for all its runs, to a stream per fire
(``Keys.live``): entries
``{attempt, text}``, then ``{attempt, end}`` once the run is over, the stream capped at
:data:`LIVE_ENTRIES`, expiring after the output retention while a run goes and
:data:`KEPT_AFTER_END_MS` after its end. A run streams only once
it has lasted :data:`LIVE_AFTER` seconds and printed something: a run that ends sooner or
prints nothing costs Redis nothing more (its output is stored with its result anyway).

Live output is a view, not a record: a write that fails (Redis away for a moment) is
dropped, and the stored output (``Keys.output``) stays what a fire kept.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

import redis

from cronsvc.clock import monotonic
from cronsvc.keys import Keys
from cronsvc.run.output import Kept, unfinished
from cronsvc.store.faults import REDIS_ERRORS, describe

log = logging.getLogger("cronsvc.worker")

FLUSH_EVERY = 0.2  # seconds between two writes of the output runs gathered meanwhile
LIVE_AFTER = 0.25  # a run streams once it has lasted this long
LIVE_ENTRIES = 2000  # a fire's stream keeps about this many entries, the newest
ENTRY_MAX = 64 * 1024  # bytes of output in one entry at most
# A run's stream outlives its end this long, for a follower a moment late; its stored
# output (Keys.output) is what stays.
KEPT_AFTER_END_MS = 60_000


class LiveFeed:
    """The output of one run not yet written to its fire's stream.

    One is made per run and most runs print nothing: its stream's name, its lock and its
    buffer are made when it joins the feeds written (its first chunk), until then read
    from the class, and its close takes no lock unless it joined. Whichever comes first,
    its join or its close, takes its one ``_unjoined`` token (a list's pop, whole under
    the GIL): the other finds none."""

    key = ""  # its stream (Keys.live), once it joins
    streamed = False  # something went to the stream: its end must too
    _lock: threading.Lock | None = None  # with _pending, once it joins
    _pending: bytes | bytearray = b""

    def __init__(self, keys: Keys, fire_id: str, attempt: int, output: LiveOutput,
                 since: float | None = None) -> None:
        self._keys = keys
        self.fire_id = fire_id
        self.attempt = attempt
        self.since = monotonic() if since is None else since  # its run's start
        self._output = output
        self._unjoined = [True]  # until it joins its feeds (or is closed)

    def add(self, chunk: bytes) -> None:
        if self._unjoined:
            self._output.join(self)
        lock = self._lock
        if lock is None:  # closed before it printed: its run is over, nothing follows it
            return
        with lock:
            # Bounded, whatever the run prints between two writes: the stream is a view.
            if len(self._pending) < 4 * ENTRY_MAX:
                self._pending += chunk

    def take(self, whole: bool = False) -> str:
        """What was gathered since the last take, decoded; a character cut at the end waits
        for the rest unless ``whole``. Asked of a feed that joined only."""
        with self._lock or threading.Lock():
            data = bytes(self._pending)
            keep = 0 if whole else unfinished(data)
            self._pending = bytearray(data[len(data) - keep:]) if keep else bytearray()
        return data[:len(data) - keep].decode("utf-8", errors="replace")

    def due(self, now: float) -> bool:
        return bool(self._pending) and now - self.since >= LIVE_AFTER


_opening = threading.Lock()  # a LiveKept's feed opened by one of its run's threads


class LiveKept(Kept):
    """The keeper of a run's output whose live feed is opened at its first chunk, not at
    its start (:meth:`LiveOutput.open`: 0.5 µs a fire with its close, and most runs print
    nothing); :meth:`closed` at the run's end closes it, if it opened, and no feed opens
    after. ``run``: what names the fire (``keys``, ``claim``), ``since``: the monotonic
    time the run started."""

    def __init__(self, cap: int, live: LiveOutput | None, run: Any, since: float) -> None:
        self.cap = cap
        self._live = live
        self._run = run
        self._since = since

    feed = None  # type: ignore[assignment]  # until its first chunk

    def add(self, chunk: bytes) -> None:
        if self.feed is None and chunk:
            with _opening:
                live = self._live
                if self.feed is None and live is not None:  # not closed yet
                    run = self._run
                    feed = self.feed = live.open(run.keys, run.claim.fire_id,
                                                 run.claim.token, self._since)
                    if self._live is None:  # closed meanwhile, maybe before it saw this
                        live.close(feed)
        Kept.add(self, chunk)

    def closed(self) -> None:
        """The run is over: close its feed, if one opened (:meth:`LiveOutput.close`), and
        let none open after. No lock: a feed opening meanwhile is closed by its opener,
        who looks again once it is set (closed twice, a feed that never joined is closed
        once: its close takes the token its join would)."""
        live = self._live
        self._live = None
        feed = self.feed
        if feed is not None and live is not None:
            live.close(feed)


class LiveOutput:
    """Writes the output of a worker's runs to their fires' streams, in a thread."""

    def __init__(self, client: redis.Redis, retention_ms: Callable[[], int]) -> None:
        self.client = client
        self.retention_ms = retention_ms
        self._feeds: set[LiveFeed] = set()
        self._lock = threading.Lock()
        # Held while output is taken from feeds and written: a run's end is written after
        # the last of its output, never beside it.
        self._writing = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="cronsvc-live", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def open(self, keys: Keys, fire_id: str, attempt: int, since: float | None = None
             ) -> LiveFeed:
        """The feed of a run starting now (or at monotonic time ``since``): attempt
        ``attempt`` of fire ``fire_id``, whose stream is ``keys.live(fire_id)``."""
        return LiveFeed(keys, fire_id, attempt, self, since)

    def join(self, feed: LiveFeed) -> None:
        """A feed has output: write it from now on (unless its run is over)."""
        with self._lock:  # its token taken and the feed added in one hold (see close)
            if not feed._unjoined:  # joined by another thread of its run, or closed
                return
            # Made before its token is taken: a thread of its run that finds the token
            # gone finds them (a close may take it meanwhile: then they go unused).
            feed.key = feed._keys.live(feed.fire_id)
            feed._pending = bytearray()
            feed._lock = threading.Lock()
            try:
                feed._unjoined.pop()
            except IndexError:  # closed meanwhile
                return
            self._feeds.add(feed)

    def close(self, feed: LiveFeed) -> None:
        """The run is over: if it streamed, write the rest of its output and its end now,
        before its result (a follower sees the end, then the outcome)."""
        try:
            feed._unjoined.pop()
            return  # never printed: the writer never saw it, nor will it
        except IndexError:  # it joined, its token taken and the feed added in one hold
            pass
        with self._lock:
            self._feeds.discard(feed)
        with self._writing:
            if feed.streamed:
                self._write([(feed, feed.take(whole=True))], end=True)

    def _loop(self) -> None:
        while not self._stop.wait(FLUSH_EVERY):
            now = monotonic()
            with self._lock:
                due = [feed for feed in self._feeds if feed.due(now)]
            if due:
                with self._writing:
                    self._write([(feed, feed.take()) for feed in due])

    def _write(self, items: list[tuple[LiveFeed, str]], end: bool = False) -> None:
        ttl = self.retention_ms()
        pipe = self.client.pipeline(transaction=False)
        for feed, text in items:
            for start in range(0, len(text), ENTRY_MAX):
                part = text[start:start + ENTRY_MAX]
                pipe.xadd(feed.key, {"attempt": feed.attempt, "text": part},
                          maxlen=LIVE_ENTRIES, approximate=True)
            if end:
                pipe.xadd(feed.key, {"attempt": feed.attempt, "end": 1},
                          maxlen=LIVE_ENTRIES, approximate=True)
            pipe.pexpire(feed.key, KEPT_AFTER_END_MS if end else ttl)
            feed.streamed = True
        try:
            pipe.execute()
        except REDIS_ERRORS as exc:
            log.debug("live output not written: %s", describe(exc))
