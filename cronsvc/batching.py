"""Many commands in one round trip, without the per-command cost of redis-py's Pipeline.

The ack of a batch is one EVALSHA per fire. redis-py's pipeline spends about
as much time per command in Python as Redis spends running the script, so the
hot path packs RESP itself (only a few arguments change from fire to fire) and
reads the replies straight from a pooled connection.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import redis


def bulk(value: Any) -> bytes:
    """One argument in RESP (str as UTF-8, numbers in decimal)."""
    if not isinstance(value, bytes):
        value = value.encode() if isinstance(value, str) else str(value).encode()
    return b"$%d\r\n%s\r\n" % (len(value), value)


def send_many(client: redis.Redis, packed: Sequence[bytes]) -> list[Any]:
    """Send packed commands in one write; replies in order, error replies as exceptions."""
    pool = client.connection_pool
    conn = pool.get_connection()
    replies: list[Any] = []
    try:
        conn.send_packed_command([b"".join(packed)], check_health=True)
        for _ in packed:
            try:
                replies.append(conn.read_response())
            except redis.ResponseError as exc:  # a whole reply was read: the stream is intact
                replies.append(exc)
    except BaseException:
        conn.disconnect()  # replies left unread would answer the next caller's commands
        raise
    finally:
        pool.release(conn)
    return replies
