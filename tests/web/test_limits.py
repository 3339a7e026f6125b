"""What a request may cost a real `cronsvc web` before it is refused: a body over the
limit, declared or sent in chunks, is answered 413 before it is read, and a caller with no
token is answered 401 before a byte of its body is read. Raw sockets send the headers
alone, so a server that waited for the body would never answer (the socket's timeout
fails the test)."""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

import pytest

from cronsvc.client.client import Client
from cronsvc.testing import WebServer
from tests.support.web import OPERATOR_TOKEN

pytestmark = pytest.mark.slow
TOKEN = OPERATOR_TOKEN


def answer(web: WebServer, head: list[str], *chunks: bytes) -> tuple[int, dict[str, Any]]:
    """Send a request's ``head`` and ``chunks`` of its body (never its end), and read the
    answer: (status, JSON body)."""
    with socket.create_connection(("127.0.0.1", web.port), timeout=20) as sock:
        sock.sendall("\r\n".join([*head, f"Host: 127.0.0.1:{web.port}", "", ""]).encode())
        for chunk in chunks:
            sock.sendall(b"%x\r\n%s\r\n" % (len(chunk), chunk))
        reply = sock.makefile("rb")
        status = int(reply.readline().split(b" ", 2)[1])
        lines = iter(reply.readline, b"\r\n")  # the headers, up to the blank line
        length = next(int(h.split(b":")[1]) for h in lines if h.lower().startswith(
            b"content-length:"))
        for _ in lines:
            pass
        return status, json.loads(reply.read(length))


def test_a_declared_body_over_the_limit_is_refused_before_it_is_read(
        tmp_path: Path, redis_url: str, config: Path) -> None:
    with WebServer(tmp_path, redis_url, config, env={"CRONSVC_WEB_TOKEN": TOKEN}) as web:
        for auth in ([], [f"Authorization: Bearer {TOKEN}"]):
            status, body = answer(web, ["POST /api/v1/jobs/digest/trigger HTTP/1.1",
                                        "Content-Type: application/json",
                                        "Content-Length: 300000000", *auth])
            assert (status, body) == (413, {
                "error": "the request body is over 1,048,576 bytes (the server's --max-body)",
                "status": 413})


def test_a_caller_without_a_token_is_refused_before_its_body_is_read(
        tmp_path: Path, redis_url: str, config: Path, client: Client) -> None:
    with WebServer(tmp_path, redis_url, config, env={"CRONSVC_WEB_TOKEN": TOKEN}) as web:
        for framing in ("Content-Length: 500000", "Transfer-Encoding: chunked"):
            status, body = answer(web, ["POST /api/v1/jobs/digest/trigger HTTP/1.1",
                                        "Content-Type: application/json", framing])
            assert status == 401 and "sign in" in body["error"]
        assert client.queue().due_count == 0


def test_a_chunked_body_is_refused_once_past_the_limit(
        tmp_path: Path, redis_url: str, config: Path, client: Client) -> None:
    with WebServer(tmp_path, redis_url, config, "--max-body", "128KiB",
                   env={"CRONSVC_WEB_TOKEN": TOKEN}) as web:
        head = ["POST /api/v1/jobs/digest/trigger HTTP/1.1", "Content-Type: application/json",
                "Transfer-Encoding: chunked", f"Authorization: Bearer {TOKEN}"]
        status, body = answer(web, head, b'{"payload": "', *[b"x" * 16384] * 9)
        assert (status, body["error"]) == (
            413, "the request body is over 131,072 bytes (the server's --max-body)")
        assert client.queue().due_count == 0
        with web.client(TOKEN) as http:  # under the limit: read, and judged on its merits
            capped = http.post("/api/v1/jobs/digest/trigger", json={"payload": "x" * 70_000})
        assert (capped.status_code, capped.json()["error"]) == (
            400, "digest: payload: 70,002 bytes as JSON; at most 65,536")
