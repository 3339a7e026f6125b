"""Sending one HTTP request for a run, which its :class:`~cronsvc.run.outcome.Stop` ends
at once.

A blocking client cannot be stopped from another thread: closing it leaves the thread
in its read, and the other side sees nothing until the read times out. So the request
runs on an event loop of its own, in the run's thread, and a cancel, a lost lease, a
shutdown or the job's timeout cancels it: its connection is closed then and there. The
loop is closed without waiting for its executor, where a name lookup that hangs would
otherwise hold the run. The client follows the rules of every request cronsvc sends
(:func:`cronsvc.outbound.client_settings`): certificates checked, no redirect followed.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Mapping
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any

import httpx

from cronsvc.outbound import client_settings, first_line
from cronsvc.run.outcome import OUTPUT_CAP, How, Stop

#: How long a cancelled request may take to close its connection before the run returns.
CLOSE_S = 1.0


class RequestFailed(Exception):
    """No answer: the host unreachable, the connection refused or broken, TLS refused, or
    nothing within the request's own timeout. The message is one line, without the URL."""


@dataclass(frozen=True)
class Answer:
    """What came back: the status and the tail of the body (at most OUTPUT_CAP chars)."""

    status: int
    reason: str
    version: str
    location: str | None
    tail: str

    @property
    def status_line(self) -> str:
        return f"{self.version} {self.status} {self.reason}".rstrip()


def send(method: str, url: str, headers: Mapping[str, str], content: bytes | None,
         timeout: float, stop: Stop) -> Answer | How:
    """Send the request and read the answer; ``"cancelled"`` or ``"timeout"`` when
    ``stop`` ended it first, RequestFailed when nothing usable came back."""
    loop = asyncio.new_event_loop()
    try:
        return loop.run_until_complete(
            _until_stopped(_exchange(method, url, headers, content, timeout), stop))
    finally:
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.close()  # without waiting for the executor (a hung lookup is left to itself)


async def _until_stopped(work: Coroutine[Any, Any, Answer], stop: Stop) -> Answer | How:
    task = asyncio.ensure_future(work)
    while True:
        await asyncio.wait({task}, timeout=stop.next_look())
        if task.done():
            return task.result()
        how = stop.ended()
        if how is not None:
            task.cancel()
            await asyncio.wait({task}, timeout=CLOSE_S)
            return how


async def _exchange(method: str, url: str, headers: Mapping[str, str],
                    content: bytes | None, timeout: float) -> Answer:
    try:
        async with asyncio.timeout(timeout):  # the whole exchange, not each read
            async with httpx.AsyncClient(**client_settings(timeout)) as client:
                async with client.stream(method, url, headers=headers,
                                         content=content) as reply:
                    tail = b""
                    async for chunk in reply.aiter_bytes():
                        tail = (tail + chunk)[-OUTPUT_CAP:]
    except (TimeoutError, httpx.TimeoutException):
        raise RequestFailed(f"no answer within {timeout:g}s") from None
    except (httpx.HTTPError, httpx.InvalidURL) as exc:
        raise RequestFailed(first_line(exc) or type(exc).__name__) from None
    reason = reply.reason_phrase or _phrase(reply.status_code)
    return Answer(reply.status_code, reason, reply.http_version,
                  reply.headers.get("Location"), tail.decode(errors="replace"))


def _phrase(status: int) -> str:
    """The standard reason of ``status`` (HTTP/2 answers carry none)."""
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return ""
