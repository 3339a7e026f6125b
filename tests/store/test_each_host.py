"""The each-host copy script: every host that looks within the window copies each due
fire of the each-host pool into its own queue, once; after the window the fire goes, and
no host is waited for. Real Redis, explicit ``now_ms``."""

from __future__ import annotations

import redis

from cronsvc.keys import EACH_HOST, Keys, host_pool
from cronsvc.store.scripts import Scripts

T0 = 1_763_830_000_000
K = Keys()


def test_each_host_copies_a_due_fire_once_and_the_fire_leaves_after_the_window(
        r: redis.Redis) -> None:
    s = Scripts(r)
    base = K.with_pool(EACH_HOST).queue
    r.zadd(base, {f"sweep@{T0}": T0, f"sweep@{T0 + 60_000}": T0 + 60_000})
    assert s.each_host(K, "a", 30_000, now_ms=T0 + 10) == (1, T0 + 60_000)
    assert s.each_host(K, "a", 30_000, now_ms=T0 + 20) == (0, T0 + 60_000)  # once per host
    assert s.each_host(K, "b", 30_000, now_ms=T0 + 20_000)[0] == 1  # a host that joins
    assert r.zrange(K.with_pool(host_pool("a")).queue, 0, -1, withscores=True) == [
        (f"sweep@{T0}!@a", T0)]
    assert r.zrange(K.with_pool(host_pool("b")).queue, 0, -1) == [f"sweep@{T0}!@b"]
    # Past the window the fire goes; host c, too late, gets none; a host gone is not awaited.
    assert s.each_host(K, "c", 30_000, now_ms=T0 + 40_000) == (0, T0 + 60_000)
    assert r.zrange(base, 0, -1) == [f"sweep@{T0 + 60_000}"]
    assert not r.hexists(K.each_host_marks, f"sweep@{T0}")
