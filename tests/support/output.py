"""Reading a run's output cut in two (cronsvc/run/output.py): head, tail, bytes between."""

from __future__ import annotations


def split_at_gap(output: str) -> tuple[str, str, int]:
    """The head, the tail and the bytes left out between, of an output cut in two."""
    head, _, rest = output.partition("... ")
    count, _, tail = rest.partition(" bytes left out ...\n")
    return head, tail, int(count)


def numbered(head: str, tail: str, last: int) -> bool:
    """Whether ``head`` holds lines 1, 2, ... and ``tail`` ..., ``last`` - 1, ``last`` of
    ``seq 1 LAST``, whole lines each."""
    first = [int(n) for n in head.splitlines()]
    end = [int(n) for n in tail.splitlines()]
    return first == list(range(1, len(first) + 1)) and end == list(
        range(last + 1 - len(end), last + 1))
