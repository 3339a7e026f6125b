"""The record of fires that ran: what ``backfill`` reads so it never runs a fire twice.

The history of a job is capped (100 records by default), so it cannot tell whether a
fire of last month ran. The scripts that record the end of a run (``lua/ack-8+.lua``,
``lua/fail-14.lua`` when the fire dies) also append the fire to a compact record:

- one Redis string per *owner* (the job, or ``!<schedule id>`` for a runtime schedule's
  fires) per period of ``PERIOD_MS`` (2**30 ms, 12.4 days), named by :meth:`Keys.ran`;
- 4 bytes per fire that ran: its due time's offset in the period, big-endian;
- kept until ``REACH_MS`` (35 days) after its period ends.

So every fire due in the last ``REACH_MS`` that ran is in the record: a minutely job's
week is 40 KB of entries (66 KB of Redis memory, the string's slack included). Only fires
of the job's own schedule and of runtime schedules are recorded (their ids are stable,
``job@due`` and ``job@due!id``): one-offs have fresh ids and each-host copies belong to
one host. Fires that ended before the record existed are not in it.
"""

from __future__ import annotations

import struct

from cronsvc.fires import HOST_MARK, split_fire
from cronsvc.keys import Keys

__all__ = ["PERIOD_BITS", "PERIOD_MS", "REACH_MS", "RanEntries", "decode", "period_of",
           "ran_entry"]

PERIOD_BITS = 30
#: The span of one record string: a due time's offset in it fits 4 bytes.
PERIOD_MS = 1 << PERIOD_BITS
#: How long a period's record outlives the period: how far back ``backfill`` can reach.
REACH_MS = 35 * 86_400_000
_OFFSET = struct.Struct(">I")


def period_of(due_ms: int) -> int:
    return due_ms >> PERIOD_BITS


def ran_entry(keys: Keys, fid: str) -> tuple[str, bytes] | None:
    """The record string ``fid`` goes to on its shard ``keys`` and the 4 bytes it appends
    there; None if it is not recorded (a one-off, one host's run)."""
    job, due, tag, bang = split_fire(fid)
    if tag is not None or (bang is not None and bang.startswith(HOST_MARK)):
        return None
    owner = job if bang is None else "!" + bang
    return keys.ran(owner, period_of(due)), _OFFSET.pack(due & (PERIOD_MS - 1))


class RanEntries:
    """:func:`ran_entry` for the many fires acked on shard ``keys``: the name of each
    record string made once (per job, that of its last period: a worker may keep one for
    good), and a fire of its job's own schedule (most fires) read without
    :func:`split_fire`."""

    __slots__ = ("keys", "_names", "_dues")

    def __init__(self, keys: Keys) -> None:
        self.keys = keys
        # job -> ('<job>@', the period of its last fire, that period's string)
        self._names: dict[str, tuple[str, int, str]] = {}
        # due time as a fire id writes it -> (its period, its entry): many fires are due
        # at the same time
        self._dues: dict[str, tuple[int, bytes]] = {}

    def entry(self, fid: str, job: str) -> tuple[str, bytes] | None:
        """:func:`ran_entry` of ``fid``, a fire of ``job`` (a hint: any other works)."""
        hit = self._names.get(job)
        if hit is None:
            if len(self._names) >= _NAMES_KEPT:
                self._names.clear()
            hit = self._names[job] = (job + "@", -1, "")
        if not fid.startswith(hit[0]):
            return ran_entry(self.keys, fid)
        digits = fid[len(hit[0]):]
        due = self._dues.get(digits)
        if due is None:
            if not digits.isdecimal():  # a one-off, a runtime schedule's, one host's...
                return ran_entry(self.keys, fid)
            if len(self._dues) >= _DUES_KEPT:
                self._dues.clear()
            ms = int(digits)
            due = self._dues[digits] = (ms >> PERIOD_BITS, _OFFSET.pack(ms & _IN_PERIOD))
        if hit[1] != due[0]:
            hit = self._names[job] = (hit[0], due[0], self.keys.ran(job, due[0]))
        return hit[2], due[1]


_DUES_KEPT = 4096
#: Jobs whose record string a :class:`RanEntries` remembers at most.
_NAMES_KEPT = 100_000
_IN_PERIOD = PERIOD_MS - 1


def decode(blob: bytes | None, period: int) -> set[int]:
    """The due times (ms) a record string of ``period`` holds."""
    if not blob:
        return set()
    start = period << PERIOD_BITS
    usable = len(blob) - len(blob) % _OFFSET.size
    return {start + offset for (offset,) in _OFFSET.iter_unpack(blob[:usable])}
