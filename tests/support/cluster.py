"""Redis topologies beyond one server, for tests: a Redis Cluster of masters and a Sentinel.

Every process is the redis-server binary the other tests use
(:func:`cronsvc.process.redis_server.find_redis_server`), each with its own data
directory and loopback port, and every wait polls with a deadline.
"""

from __future__ import annotations

import random
import socket
from pathlib import Path

import redis

from cronsvc.errors import RedisServerError
from cronsvc.process.redis_server import RedisServer
from cronsvc.testing.wait import poll

SLOTS = 16384
BUS_OFFSET = 10_000  # Redis 6.2 has no cluster-port setting: the bus is always port + 10000


def _bindable(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_cluster_port() -> int:
    """A free port whose cluster bus port (port + 10000) is free as well."""
    for _ in range(200):
        port = random.randint(20_000, 55_000)
        if _bindable(port) and _bindable(port + BUS_OFFSET):
            return port
    raise RedisServerError("no free port pair for a cluster node")


def slot_ranges(masters: int) -> list[range]:
    """The 16384 slots cut into ``masters`` contiguous ranges."""
    bounds = [SLOTS * i // masters for i in range(masters + 1)]
    return [range(bounds[i], bounds[i + 1]) for i in range(masters)]


class LocalCluster:
    """``masters`` cluster-enabled redis-servers (no replicas) holding all slots.

    ``cluster-require-full-coverage no``: when a master dies, the others keep
    serving their own slots, which is what a sharded fleet relies on.
    """

    def __init__(self, base_dir: Path, binary: str, masters: int = 3,
                 node_timeout_ms: int = 2000) -> None:
        self.nodes = [
            RedisServer(base_dir / f"node{i}", free_cluster_port(), binary=binary, extra_args=[
                "--cluster-enabled", "yes",
                "--cluster-config-file", "nodes.conf",
                "--cluster-node-timeout", str(node_timeout_ms),
                "--cluster-require-full-coverage", "no",
            ])
            for i in range(masters)
        ]

    @property
    def url(self) -> str:
        """A cronsvc cluster URL listing every node as a startup node."""
        hosts = ",".join(f"127.0.0.1:{n.port}" for n in self.nodes)
        return f"redis+cluster://{hosts}/0"

    def admin(self, node: RedisServer) -> redis.Redis:
        return redis.Redis(port=node.port, decode_responses=True, socket_timeout=5)

    def start(self, timeout: float = 20.0) -> LocalCluster:
        for node in self.nodes:
            node.start(timeout)
        first = self.admin(self.nodes[0])
        for node, slots in zip(self.nodes, slot_ranges(len(self.nodes)), strict=True):
            with self.admin(node) as c:
                # ADDSLOTSRANGE needs Redis 7; 6.2 takes every slot as an argument.
                c.execute_command("CLUSTER ADDSLOTS", *slots)
            if node is not self.nodes[0]:
                first.execute_command("CLUSTER MEET", "127.0.0.1", node.port)
        first.close()
        self.wait_ok(self.nodes, timeout)
        return self

    def wait_ok(self, nodes: list[RedisServer], timeout: float = 20.0) -> None:
        """Wait until every node of ``nodes`` knows them all and says ``cluster_state:ok``."""
        def ready(node: RedisServer) -> bool:
            with self.admin(node) as c:
                info = c.cluster("INFO")  # parsed into a dict by redis-py
                return (info["cluster_state"] == "ok"
                        and int(info["cluster_known_nodes"]) >= len(self.nodes))

        for node in nodes:
            poll(lambda node=node: ready(node), timeout, f"cluster_state:ok on port {node.port}")

    def master_of(self, key: str) -> RedisServer:
        """The node serving ``key``'s slot."""
        with self.admin(self.nodes[0]) as c:
            slot = int(c.execute_command("CLUSTER KEYSLOT", key))
        for node, slots in zip(self.nodes, slot_ranges(len(self.nodes)), strict=True):
            if slot in slots:
                return node
        raise AssertionError(f"slot {slot} has no node")

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()


class SentinelServer(RedisServer):
    """redis-server in sentinel mode, monitoring ``master`` as service ``service``.

    The sentinel asks for ``password`` (when given) and logs in to the master
    with ``master_password``.
    """

    def __init__(self, data_dir: Path, master: RedisServer, *, service: str = "cronsvc",
                 binary: str, password: str | None = None,
                 master_password: str | None = None, down_after_ms: int = 5000) -> None:
        super().__init__(data_dir, binary=binary)
        self.master = master
        self.down_after_ms = down_after_ms
        self.service = service
        self.password = password
        self.master_password = master_password

    @property
    def conf_path(self) -> Path:
        return self.data_dir / "sentinel.conf"

    def argv(self) -> list[str]:
        return [self.binary, str(self.conf_path.resolve()), "--sentinel"]

    def start(self, timeout: float = 20.0) -> SentinelServer:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        lines = [
            f"port {self.port}",
            "bind 127.0.0.1",
            "daemonize no",
            f"dir {self.data_dir.resolve()}",
            f"logfile {self.log_path.resolve()}",
            f"sentinel monitor {self.service} 127.0.0.1 {self.master.port} 1",
            f"sentinel down-after-milliseconds {self.service} {self.down_after_ms}",
        ]
        if self.password:
            lines.append(f"requirepass {self.password}")
        if self.master_password:
            lines.append(f"sentinel auth-pass {self.service} {self.master_password}")
        self.conf_path.write_text("\n".join(lines) + "\n")  # sentinel rewrites it: a copy each
        super().start(timeout)
        return self

    def wait_ready(self, timeout: float = 20.0) -> None:
        """Wait until the sentinel reports the master up (role seen, not down)."""
        def master_known() -> bool:
            if self.proc is not None and self.proc.poll() is not None:
                raise RedisServerError(f"sentinel on port {self.port} exited: {self.log_tail()}")
            with redis.Redis(port=self.port, password=self.password, socket_timeout=2,
                             decode_responses=True) as c:
                state = c.sentinel_master(self.service)
                return state.get("role-reported") == "master" and not state.get("is_sdown")

        poll(master_known, timeout, f"sentinel on port {self.port} to see its master")
