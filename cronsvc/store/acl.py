"""The Redis ACL a cronsvc user needs: its commands, key patterns and channels, no more.

Scripts run under the ACL of the user who calls them, so the commands inside
``lua/*.lua`` count as well as the ones the planner, workers and client send.
A command added to the code or a script must be added here too
(tests/store/test_acl.py compares this list with the scripts).

    admin.execute_command("ACL", "SETUSER", *acl_setuser_args("cronsvc", password))
"""

from __future__ import annotations

#: Sent by every connection: connect() checks with PING; SELECT only for a db other than 0.
CONNECTION_COMMANDS = ("ping", "select")
#: How scripts run: EVALSHA, and SCRIPT LOAD after NOSCRIPT (a restart, SCRIPT FLUSH).
SCRIPT_COMMANDS = ("evalsha", "script|load")
#: Called from inside lua/*.lua.
LUA_COMMANDS = (
    "append", "del", "get", "hdel", "hexists", "hget", "hincrby", "hkeys", "hlen", "hmget", "hset",
    "hsetnx", "lpush", "ltrim", "pexpire", "pexpireat", "set", "time", "xadd", "xrevrange",
    "zadd", "zmscore", "zrange", "zrangebyscore",
    "zrem",
    "zremrangebyrank", "zremrangebyscore", "zscore",
)
#: Sent directly: planner (job state, generations, presence), worker (presence, wake-ups,
#: the definitions it holds), client (server time, job names, pause and resume), notifier
#: (the outbox and its messages).
DIRECT_COMMANDS = (
    "expire", "get", "hdel", "hexists", "hget", "hgetall", "hkeys", "hlen", "hmget", "hset",
    "info", "lindex", "llen", "lrange", "ltrim",
    "publish", "subscribe", "time", "unsubscribe", "xread", "zadd", "zcard", "zcount",
    "zmscore", "zrange", "zrangebyscore", "zrem", "zscore",
)
#: Everything a cronsvc user runs on one Redis server (or sentinel-managed master).
REQUIRED_COMMANDS: tuple[str, ...] = tuple(sorted(set(
    CONNECTION_COMMANDS + SCRIPT_COMMANDS + LUA_COMMANDS + DIRECT_COMMANDS
)))
#: What redis-py's cluster client adds: the slot map and the key positions of commands.
CLUSTER_COMMANDS = ("cluster|slots", "command")


def key_patterns(prefix: str = "") -> list[str]:
    """Every key cronsvc touches (see :mod:`cronsvc.keys`): ``cron:*`` and ``scheduler:*``."""
    return [f"~{prefix}cron:*", f"~{prefix}scheduler:*"]


def channel_patterns(prefix: str = "") -> list[str]:
    """The wake-up channels (``cron:wakeup`` and one per shard)."""
    return [f"&{prefix}cron:*"]


def acl_rules(password: str, *, prefix: str = "", cluster: bool = False) -> list[str]:
    """The ACL rules of a cronsvc user, starting from ``reset`` so applying them twice is safe.

    ``resetchannels`` too: Redis 6.2's ``reset`` grants every channel (its
    ``acl-pubsub-default``), and a channel pattern cannot narrow that.
    """
    commands = REQUIRED_COMMANDS + (CLUSTER_COMMANDS if cluster else ())
    return ["reset", "resetchannels", "on", f">{password}", *key_patterns(prefix),
            *channel_patterns(prefix),
            *(f"+{c}" for c in commands)]


def acl_setuser_args(user: str, password: str, *, prefix: str = "",
                     cluster: bool = False) -> list[str]:
    """Arguments after ``ACL SETUSER`` for ``user``; a cluster needs them on every node."""
    return [user, *acl_rules(password, prefix=prefix, cluster=cluster)]


def acl_line(user: str, password: str, *, prefix: str = "", cluster: bool = False) -> str:
    """The same as one ``ACL SETUSER`` command line, for redis-cli or the docs."""
    args = acl_setuser_args(user, password, prefix=prefix, cluster=cluster)
    return " ".join(["ACL", "SETUSER", *args])
