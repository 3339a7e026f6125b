"""Sending one HTTP request for a run, which its :class:`~cronsvc.run.outcome.Stop` ends
at once.

A blocking client cannot be stopped from another thread: closing it leaves the thread
in its read, and the other side sees nothing until the read times out. So the request
runs on an event loop of its own, in the run's thread, and a cancel, a lost lease, a
shutdown or the job's timeout cancels it: its connection is closed then and there. The
loop is closed without waiting for its executor, where a name lookup that hangs would
otherwise hold the run. The client follows the rules of every request cronsvc sends
(:func:`cronsvc.outbound.client_settings`): certificates checked, no redirect followed.

Each thread keeps its loop and client between requests (:class:`_Session`), so a job
that fires often reuses its connection rather than paying for a loop, a client and a
TCP (and TLS) handshake per fire: a connection is reused only within ``KEEPALIVE_S`` of
its last answer, well inside the idle timeout of common servers, and the client keeps
no cookies, so one job's answer never changes what another job sends. A request that
did not end with an answer (stopped, timed out, refused) takes its thread's loop and
client with it: the next one starts afresh.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Coroutine, Mapping
from dataclasses import dataclass
from http import HTTPStatus
from http.cookiejar import Cookie, CookieJar
from typing import Any

import httpx

from cronsvc.outbound import client_settings, first_line, trust_store_context
from cronsvc.run.outcome import OUTPUT_CAP, How, Stop

#: How long a cancelled request may take to close its connection before the run returns.
CLOSE_S = 1.0
#: How long an idle connection is kept for the thread's next request.
KEEPALIVE_S = 1.0
#: The environment a client reads when it is made (its proxies): another value, another client.
PROXY_VARIABLES = ("http_proxy", "https_proxy", "all_proxy", "no_proxy",
                   "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY")


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
    session = _Session.of_this_thread()
    answered = False
    try:
        got = session.loop.run_until_complete(_until_stopped(
            _exchange(session.client, method, url, headers, content, timeout), stop))
        answered = isinstance(got, Answer)
        return got
    finally:
        if not answered:
            session.close()


class _NoCookies(CookieJar):
    """A jar that keeps nothing: a fire's request carries only what its job says."""

    def set_cookie(self, cookie: Cookie) -> None:
        pass

    def extract_cookies(self, response: Any, request: Any) -> None:
        pass


class _Session:
    """One thread's event loop and HTTP client, kept while its requests end answered and
    the trust store and proxies it was made with stay the same."""

    _local = threading.local()

    def __init__(self, key: tuple[Any, ...]) -> None:
        self.key = key
        self.loop = asyncio.new_event_loop()
        settings = client_settings(CLOSE_S)  # each request says its own timeout
        self.client = httpx.AsyncClient(
            **settings, cookies=_NoCookies(),
            limits=httpx.Limits(max_keepalive_connections=4, keepalive_expiry=KEEPALIVE_S))

    @classmethod
    def of_this_thread(cls) -> _Session:
        key = (trust_store_context("http"), *map(os.environ.get, PROXY_VARIABLES))
        session: _Session | None = getattr(cls._local, "session", None)
        if session is None or session.key != key:
            if session is not None:
                session.close()
            session = cls._local.session = cls(key)
        return session

    def close(self) -> None:
        """Close the client's connections and the loop, without waiting for the loop's
        executor (a hung name lookup is left to itself)."""
        if getattr(self._local, "session", None) is self:
            del self._local.session
        try:
            self.loop.run_until_complete(asyncio.wait_for(self.client.aclose(), CLOSE_S))
        except Exception:  # noqa: BLE001 - closing what is already broken: nothing to tell
            pass
        self.loop.run_until_complete(self.loop.shutdown_asyncgens())
        self.loop.close()


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


async def _exchange(client: httpx.AsyncClient, method: str, url: str,
                    headers: Mapping[str, str], content: bytes | None,
                    timeout: float) -> Answer:
    try:
        async with asyncio.timeout(timeout):  # the whole exchange, not each read
            async with client.stream(method, url, headers=headers, content=content,
                                     timeout=timeout) as reply:
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
