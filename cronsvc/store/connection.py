"""Open a checked Redis connection from a URL, and show URLs without their secrets.

One URL names the whole deployment:

- ``redis://[user:pass@]host:port/db``, ``rediss://`` for TLS, ``unix:///path.sock``;
- ``redis+cluster://host:port[,host2:port2]/0`` (``rediss+cluster://``): Redis Cluster,
  the hosts are startup nodes (``cluster=True`` does the same for a plain URL);
- ``redis+sentinel://[user:pass@]host:port[,host2:port2]/service[/db]``
  (``rediss+sentinel://``): the master of ``service`` as the sentinels name it;
  ``sentinel_username`` / ``sentinel_password`` in the query log in to the sentinels.

TLS options go in the query: ``ssl_ca_certs``, ``ssl_certfile``, ``ssl_keyfile``,
``ssl_cert_reqs`` (``none``, ``optional``, ``required``) and a few more
(:data:`TLS_OPTIONS`); they need a ``rediss`` scheme.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, cast
from urllib.parse import parse_qsl, unquote, urlsplit, urlunsplit

import redis
from redis.backoff import NoBackoff
from redis.cluster import ClusterNode, RedisCluster
from redis.connection import URL_QUERY_ARGUMENT_PARSERS
from redis.exceptions import RedisClusterException
from redis.retry import Retry
from redis.sentinel import MasterNotFoundError, Sentinel

from cronsvc.clock import SYSTEM, redis_ms
from cronsvc.errors import RedisUnavailable
from cronsvc.secrets import mask_url, netloc_parts, secrets_in

TLS_OPTIONS = frozenset({
    "ssl_ca_certs", "ssl_ca_path", "ssl_certfile", "ssl_keyfile", "ssl_password",
    "ssl_cert_reqs", "ssl_check_hostname", "ssl_min_version",
})
SENTINEL_OPTIONS = frozenset({"sentinel_username", "sentinel_password"})
_QUERY_OPTIONS = frozenset(URL_QUERY_ARGUMENT_PARSERS) | TLS_OPTIONS | {
    "client_name", "username", "password",
}
_CERT_REQS = ("none", "optional", "required")
_DB = re.compile(r"[0-9]+")


@dataclass(frozen=True)
class Target:
    """What a URL asks for: ``single`` server, ``cluster`` or ``sentinel`` service."""

    kind: str
    url: str  # for single and cluster: a plain redis://, rediss:// or unix:// URL
    nodes: tuple[tuple[str, int], ...] = ()  # cluster startup nodes, or the sentinels
    service: str = ""
    kwargs: dict[str, Any] = field(default_factory=dict)  # for every data connection
    sentinel_kwargs: dict[str, Any] = field(default_factory=dict)


def _check_db(value: str, what: str) -> str:
    """``value`` if it is a database number; ValueError naming it as ``what`` says."""
    if not _DB.fullmatch(value):
        raise ValueError(f"{what.format(value)} is not a database number (0, 1, 2...)")
    return value


def _hosts(hosts: str, default_port: int) -> tuple[tuple[str, int], ...]:
    found = []
    for item in hosts.split(","):
        host, port = item.strip(), default_port
        if host.startswith("["):  # [::1]:26379
            end = host.index("]")
            if host[end + 1:].startswith(":"):
                port = int(host[end + 2:])
            host = host[1:end]
        elif ":" in host:
            host, _, p = host.rpartition(":")
            port = int(p)
        if not host:
            raise ValueError(f"empty host in {hosts!r}")
        found.append((host, port))
    return tuple(found)


def parse_target(url: str, *, cluster: bool | None = None) -> Target:
    """Check ``url`` and say how to connect; ValueError names what is wrong with it.

    ``cluster=True`` makes a plain ``redis://`` / ``rediss://`` URL a cluster one
    (the ``redis.cluster: true`` setting); the URL scheme alone may say so too.
    """
    parts = urlsplit(url)
    base, plus, mode = parts.scheme.partition("+")
    if base not in ("redis", "rediss", "unix") or mode not in ("", "cluster", "sentinel") or (
            plus and base == "unix"):
        raise ValueError(
            f"unsupported scheme {parts.scheme!r}: use redis://, rediss://, unix://, "
            "redis+cluster://, rediss+cluster://, redis+sentinel:// or rediss+sentinel://")
    tls = base == "rediss"
    query = dict(parse_qsl(parts.query, keep_blank_values=True))
    allowed = _QUERY_OPTIONS | (SENTINEL_OPTIONS if mode == "sentinel" else set())
    unknown = sorted(set(query) - allowed)
    if unknown:
        raise ValueError(f"unknown URL option(s) {', '.join(unknown)}")
    tls_given = sorted(set(query) & TLS_OPTIONS)
    if tls_given and not tls:
        raise ValueError(f"{', '.join(tls_given)} need(s) TLS: use a rediss scheme")
    reqs = query.get("ssl_cert_reqs")
    if reqs is not None and reqs not in _CERT_REQS:
        raise ValueError(f"ssl_cert_reqs={reqs!r}: use one of {', '.join(_CERT_REQS)}")
    if "db" in query:
        _check_db(query["db"], "db={!r}")
    if base != "unix" and mode != "sentinel" and parts.path.strip("/"):
        # redis-py reads /abc as database 0 and /1/2 as 12, without a word.
        _check_db(unquote(parts.path.strip("/")), "the URL path {!r}")

    if mode == "sentinel":
        if cluster:
            raise ValueError("a sentinel URL names one master: it cannot be a cluster")
        return _sentinel_target(parts, query, tls)
    as_cluster = mode == "cluster" or bool(cluster)
    if not as_cluster:
        return Target("single", url)
    if base == "unix":
        raise ValueError("Redis Cluster needs TCP addresses, not a unix socket")
    user, password, hosts = netloc_parts(parts.netloc)
    nodes = _hosts(hosts, 6379)
    if parts.path.strip("/") not in ("", "0"):
        raise ValueError("Redis Cluster has only database 0")
    auth = f"{user}:{password}@" if password is not None else (f"{user}@" if user else "")
    first = f"{nodes[0][0]}:{nodes[0][1]}" if ":" not in nodes[0][0] else (
        f"[{nodes[0][0]}]:{nodes[0][1]}")
    plain = urlunsplit((base, auth + first, "/0", parts.query, ""))
    return Target("cluster", plain, nodes)


def _sentinel_target(parts: Any, query: dict[str, str], tls: bool) -> Target:
    user, password, hosts = netloc_parts(parts.netloc)
    path = [p for p in parts.path.split("/") if p]
    if not path or len(path) > 2:
        raise ValueError("a sentinel URL ends in /<service name>[/<db>]")
    service = unquote(path[0])
    db = int(_check_db(unquote(path[1]), "{!r} after the service name")
             ) if len(path) == 2 else 0
    kwargs: dict[str, Any] = {"db": db}
    if user:
        kwargs["username"] = unquote(user)
    if password:
        kwargs["password"] = unquote(password)
    sentinel_kwargs: dict[str, Any] = {}
    for name, value in query.items():
        if name in SENTINEL_OPTIONS:
            sentinel_kwargs[name.removeprefix("sentinel_")] = value
            continue
        parser = cast("Callable[[str], Any] | None", URL_QUERY_ARGUMENT_PARSERS.get(name))
        try:
            kwargs[name] = parser(value) if parser else value
        except ValueError:  # the words redis-py uses for the same slip in a plain URL
            raise ValueError(f"Invalid value for {name!r} in connection URL.") from None
    if tls:
        kwargs["ssl"] = True
        # The sentinels of a TLS deployment speak TLS with the same certificates.
        sentinel_kwargs.update({k: v for k, v in kwargs.items() if k.startswith("ssl")})
    return Target("sentinel", urlunsplit(parts), _hosts(hosts, 26379), service, kwargs,
                  sentinel_kwargs)


#: Seconds a reply may take before the server counts as gone. A Redis that holds the
#: connection open and answers nothing (frozen, cut off by a partition, a failed master whose
#: host went dark) sends no reset: without this a worker or planner would wait on it for
#: ever, and never follow a sentinel or cluster failover. The URL's ``socket_timeout=``
#: changes it (a long Lua script or an fsync stall must fit in it).
REPLY_TIMEOUT = 5.0
#: How a reply that is not UTF-8 reads: with U+FFFD in place of the bytes. Every value
#: cronsvc writes is UTF-8; another one was written by hand or by another program, and must
#: reach the code that judges it (and sets it aside) rather than fail the whole reply.
ENCODING_ERRORS = "replace"


class RedisClock:
    """The Redis server's clock, the only clock the fleet goes by: scripts read it
    themselves (:meth:`script_now` is None), Python with TIME, and this host's clock when
    TIME cannot be read (on a cluster it may pick a node that is down, and work goes on
    with the shards that are up)."""

    def __init__(self, client: redis.Redis) -> None:
        self.client = client

    def now_ms(self) -> int:
        try:
            return redis_ms(self.client)
        except (redis.RedisError, RedisClusterException):
            return SYSTEM.now_ms()

    def script_now(self) -> int | None:
        return None


def client_for(
    url: str, *, cluster: bool | None = None, decode_responses: bool = True,
    timeout: float = 5.0, **kwargs: Any,
) -> redis.Redis:
    """The client for ``url``, not checked yet (a cluster client has met its nodes).

    Raises ValueError (bad URL) or a redis-py error (unreachable cluster).
    """
    target = parse_target(url, cluster=cluster)
    common = {"decode_responses": decode_responses, "socket_connect_timeout": timeout,
              "socket_timeout": REPLY_TIMEOUT, "socket_keepalive": True,
              "encoding_errors": ENCODING_ERRORS, **kwargs}
    if target.kind == "cluster":
        # Typed as redis.Redis: the command methods cronsvc calls are the same on both.
        return cast(redis.Redis, RedisCluster.from_url(
            target.url, startup_nodes=[ClusterNode(h, p) for h, p in target.nodes[1:]],
            **common))
    if target.kind == "sentinel":
        sentinels = Sentinel(
            list(target.nodes),
            # One retry, no backoff: a sentinel that refuses us (wrong password) should not
            # hold up asking the next one for ten backed-off attempts.
            sentinel_kwargs={"socket_connect_timeout": timeout, "socket_timeout": timeout,
                             "retry": Retry(NoBackoff(), 1), **target.sentinel_kwargs},
            health_check_interval=30, **{**common, **target.kwargs},
        )
        return sentinels.master_for(target.service)
    return redis.Redis.from_url(target.url, health_check_interval=30, **common)


def connect(
    url: str, *, cluster: bool | None = None, decode_responses: bool = True,
    timeout: float = 5.0, **kwargs: Any,
) -> redis.Redis:
    """A client for ``url`` (see the module docstring for every form), checked with PING.

    A cluster URL (or ``cluster=True``) gives a :class:`redis.cluster.RedisCluster`,
    a sentinel URL a :class:`redis.Redis` that follows the master; else a
    :class:`redis.Redis`. Raises :class:`RedisUnavailable` naming the URL
    (secrets masked) and the reason.
    """
    try:
        client = client_for(url, cluster=cluster, decode_responses=decode_responses,
                            timeout=timeout, **kwargs)
    except (ValueError, redis.RedisError, RedisClusterException) as exc:
        raise _unavailable(url, exc) from exc
    try:
        client.ping()
    except MasterNotFoundError as exc:
        reason = _sentinel_reason(client)
        client.close()
        raise _unavailable(url, exc, reason) from exc
    except (redis.RedisError, RedisClusterException) as exc:
        client.close()
        raise _unavailable(url, exc) from exc
    return client


def _sentinel_reason(client: redis.Redis) -> str:
    """Why no sentinel named a master, one short clause per sentinel (redis-py's own
    message embeds the repr of every client)."""
    pool = client.connection_pool
    service = getattr(pool, "service_name", "?")
    notes = []
    for sentinel in pool.sentinel_manager.sentinels:  # type: ignore[attr-defined]
        kw = sentinel.connection_pool.connection_kwargs
        try:
            state = sentinel.sentinel_master(service)
            why = f"master {state['ip']}:{state['port']} is {state['flags']}"
        except redis.RedisError as exc:
            why = str(exc) or type(exc).__name__
        notes.append(f"sentinel {kw.get('host')}:{kw.get('port')}: {why}")
    return f"no master for service {service!r} ({'; '.join(notes)})"


def _unavailable(url: str, exc: Exception, reason: str = "") -> RedisUnavailable:
    reason = reason or str(exc) or type(exc).__name__
    for secret in secrets_in(url):
        reason = reason.replace(secret, "***")
    return RedisUnavailable(f"cannot reach Redis at {mask_url(url)}: {reason}")
