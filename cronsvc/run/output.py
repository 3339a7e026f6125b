"""What a run keeps of its output: its head and its tail, the bytes between them counted.

A run printing more than its job's ``output`` size keeps the first half of that size and
the last half, joined by a line saying how much was left out::

    first lines
    ... 12345 bytes left out ...
    last lines

so the error written first and the summary written last both stay. The buffer is bounded
whatever the run prints. A :class:`Feed` given to it sees every chunk as it comes (the
worker's live output, :mod:`cronsvc.worker.live`).
"""

from __future__ import annotations

import threading
from typing import Any, Protocol

#: What a job keeps of a run's output unless it or its worker section says otherwise.
DEFAULT_OUTPUT = 16 * 1024
#: How long a fire's outputs are kept unless the worker section says otherwise: a week.
OUTPUT_RETENTION_MS = 7 * 86_400_000


_first_write = threading.Lock()  # a keeper's lock and buffers, made once (Kept._first)


class Feed(Protocol):
    """Told each chunk of a run's output as it is written."""

    def add(self, chunk: bytes) -> None: ...


class Kept:
    """The head and the tail of one run's output, at most ``cap`` bytes and the gap line.

    One is made per fire and most fires print nothing: its lock and buffers are made at
    its first write; until then what it has is read from the class."""

    _total = 0
    ends_line = True  # nothing written, or a whole line last
    _lock: threading.Lock | None = None  # a call's own threads may write at once

    def __init__(self, cap: int = DEFAULT_OUTPUT, feed: Feed | None = None) -> None:
        self.cap = cap
        self.feed = feed

    def _first(self) -> threading.Lock:
        """Its lock, made with its buffers at its first write (whichever thread of a run
        writes first)."""
        with _first_write:
            if self._lock is None:
                self._head_cap = self.cap // 2
                self._tail_cap = self.cap - self._head_cap
                self._head = bytearray()
                self._tail = bytearray()
                self._lock = threading.Lock()
            return self._lock

    def add(self, chunk: bytes) -> None:
        if not chunk:
            return
        whole = chunk
        with self._lock or self._first():
            self._total += len(chunk)
            self.ends_line = chunk.endswith(b"\n")
            room = self._head_cap - len(self._head)
            if room > 0:
                self._head += chunk[:room]
                chunk = chunk[room:]
            self._tail += chunk
            if len(self._tail) > 2 * self._tail_cap + 4096:  # trimmed now and then, not per write
                del self._tail[:-self._tail_cap]
        if self.feed is not None:
            self.feed.add(whole)

    def write(self, text: str) -> None:
        self.add(text.encode("utf-8", errors="replace"))

    @property
    def left_out(self) -> int:
        """Bytes between the head and the tail that were not kept."""
        if self._lock is None:  # nothing written
            return 0
        with self._lock:
            return max(self._total - len(self._head) - min(len(self._tail), self._tail_cap), 0)

    def text(self) -> str:
        """The output kept, decoded; a gap line where bytes were left out."""
        if not self._total or self._lock is None:  # most calls print nothing
            return ""
        with self._lock:
            head, tail = bytes(self._head), bytes(self._tail[-self._tail_cap:] if
                                                  self._tail_cap else b"")
            gap = self._total - len(head) - len(tail)
        if not gap:
            return (head + tail).decode("utf-8", errors="replace")
        # Whole lines on both sides of the gap, unless a line takes half of a side.
        end = head.rfind(b"\n") + 1
        if end > len(head) // 2:
            gap, head = gap + len(head) - end, head[:end]
        start = tail.find(b"\n") + 1
        if 0 < start <= len(tail) // 2:
            gap, tail = gap + start, tail[start:]
        first = _cut_end(head).decode("utf-8", errors="replace")
        return (first + ("" if first.endswith("\n") else "\n")
                + f"... {gap} bytes left out ...\n"
                + _cut_start(tail).decode("utf-8", errors="replace"))


def _cut_start(data: bytes) -> bytes:
    """``data`` without the continuation bytes a cut before it left at its start."""
    cut = 0
    while cut < min(3, len(data)) and data[cut] & 0xC0 == 0x80:
        cut += 1
    return data[cut:]


def _cut_end(data: bytes) -> bytes:
    """``data`` without a UTF-8 sequence a cut after it left unfinished at its end."""
    return data[:len(data) - unfinished(data)]


def unfinished(data: bytes) -> int:
    """How many bytes at the end of ``data`` begin a UTF-8 character not yet whole."""
    for back in range(1, min(4, len(data)) + 1):
        byte = data[-back]
        if byte & 0xC0 == 0xC0:  # a lead byte: is its sequence whole?
            need = 2 if byte < 0xE0 else 3 if byte < 0xF0 else 4
            return 0 if back >= need else back
        if byte & 0x80 == 0:
            return 0
    return 0


def kept_of(job: Any, feed: Feed | None = None) -> Kept:
    """The keeper of a run of ``job``: its ``output`` size (the worker section's default
    once the file is read)."""
    return Kept(output_cap(job), feed)


def output_cap(job: Any) -> int:
    """The size of the keeper of a run of ``job`` (:func:`kept_of`), for a caller that
    makes keepers of it many times."""
    return getattr(job, "output", None) or DEFAULT_OUTPUT


def excerpt(text: str, size: int = 400) -> str:
    """The end of an output, as a history record keeps it for listings and notices."""
    return text if len(text) <= size else "..." + text[-size:]
