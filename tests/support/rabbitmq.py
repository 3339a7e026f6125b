"""A private RabbitMQ node for the AMQP tests: Debian's ``rabbitmq-server`` run as a child
process of the tests, on free loopback ports, with its own node name, its own Erlang port
mapper, cookie and data under the session's tmp dir.

Nothing of it meets a RabbitMQ the machine may run as a service (apt starts one where it
may: ``rabbit@<host>`` on 5672, 25672 and epmd's 4369, reading ``/etc/rabbitmq``): every
port differs, the node is ``cronsvc-test-<port>@localhost``, and both the config file and
the environment file are ours. Without ``rabbitmq-server`` the tests skip (fail under
``CI=true``; ``.ci/run`` installs it).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from cronsvc.process.redis_server import free_port
from tests.support.parts import missing
from tests.support.wait import wait_for

#: Where Debian keeps the server's own scripts (``/usr/sbin``'s wrappers su to the
#: rabbitmq user and log to ``/var/log/rabbitmq``: the first is used when present).
SCRIPT_DIRS = (Path("/usr/lib/rabbitmq/bin"), Path("/usr/sbin"))
#: A disk nearly full would block publishers (a test hanging in a send): one MB is enough.
CONFIG = "disk_free_limit.absolute = 1MB\nloopback_users.guest = true\n"


def script(name: str) -> Path | None:
    """The path of the RabbitMQ script ``name``, or None when it is not installed."""
    found = next((d / name for d in SCRIPT_DIRS if (d / name).exists()), None)
    on_path = shutil.which(name)
    return found or (Path(on_path) if on_path else None)


class RabbitNode:
    """One RabbitMQ node: :meth:`start` returns once it takes AMQP connections."""

    def __init__(self, tmp: Path, server: Path) -> None:
        self.tmp, self.server = tmp, server
        self.port, self.dist_port, self.epmd_port = free_port(), free_port(), free_port()
        self.name = f"cronsvc-test-{self.port}@localhost"
        self.log_path = tmp / "rabbitmq.out"
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"amqp://guest:guest@127.0.0.1:{self.port}//"

    def env(self) -> dict[str, str]:
        """The node's environment (also rabbitmqctl's, to find it): all of it in tmp."""
        for d in ("mnesia", "log"):
            (self.tmp / d).mkdir(exist_ok=True)
        (self.tmp / "enabled_plugins").write_text("[].\n")
        (self.tmp / "rabbitmq.conf").write_text(CONFIG)
        (self.tmp / "rabbitmq-env.conf").write_text("")
        return dict(
            os.environ, HOME=str(self.tmp), RABBITMQ_NODENAME=self.name,
            RABBITMQ_NODE_IP_ADDRESS="127.0.0.1", RABBITMQ_NODE_PORT=str(self.port),
            RABBITMQ_DIST_PORT=str(self.dist_port), ERL_EPMD_PORT=str(self.epmd_port),
            ERL_EPMD_ADDRESS="127.0.0.1",
            RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS="-kernel inet_dist_use_interface {127,0,0,1}",
            RABBITMQ_MNESIA_BASE=str(self.tmp / "mnesia"), RABBITMQ_LOG_BASE=str(self.tmp / "log"),
            RABBITMQ_ENABLED_PLUGINS_FILE=str(self.tmp / "enabled_plugins"),
            RABBITMQ_CONFIG_FILE=str(self.tmp / "rabbitmq.conf"),
            RABBITMQ_CONF_ENV_FILE=str(self.tmp / "rabbitmq-env.conf"))

    def start(self, timeout: float = 120) -> RabbitNode:
        log = open(self.log_path, "ab")  # noqa: SIM115 - closed with the process
        self.proc = subprocess.Popen([str(self.server)], cwd=self.tmp, env=self.env(),
                                     stdout=log, stderr=log, stdin=subprocess.DEVNULL,
                                     start_new_session=True)
        log.close()
        wait_for(self.ready, timeout=timeout, interval=0.2,
                 message=f"RabbitMQ {self.name} to take AMQP connections")
        return self

    def ready(self) -> bool:
        """True once an AMQP handshake succeeds; a node that exited fails the test."""
        import amqp

        if self.proc is not None and self.proc.poll() is not None:
            tail = self.log_path.read_text(errors="replace")[-2000:]
            pytest.fail(f"rabbitmq-server exited with {self.proc.returncode}: {tail}",
                        pytrace=False)
        conn = amqp.Connection(f"127.0.0.1:{self.port}", connect_timeout=2)
        try:
            conn.connect()
        except (OSError, amqp.exceptions.AMQPError):
            return False
        conn.close()
        return True

    def stop(self) -> None:
        """``rabbitmqctl stop``, else SIGTERM then SIGKILL of the node's process group;
        then its port mapper, which outlives the node by design."""
        ctl = script("rabbitmqctl")
        if self.proc is not None and self.proc.poll() is None:
            stopped = ctl is not None and subprocess.run(
                [str(ctl), "-n", self.name, "stop"], env=self.env(), capture_output=True,
                timeout=60, check=False).returncode == 0
            if not stopped:
                os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        epmd = shutil.which("epmd")
        if epmd is not None:
            subprocess.run([epmd, "-port", str(self.epmd_port), "-kill"],
                           env=self.env(), capture_output=True, timeout=30, check=False)


@pytest.fixture(scope="session")
def rabbitmq(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RabbitNode]:
    """The session's RabbitMQ node (started by the first test that asks for it)."""
    server = script("rabbitmq-server")
    if server is None:
        missing("rabbitmq-server not found: install Debian's rabbitmq-server "
                "(apt-get install rabbitmq-server)")
    node = RabbitNode(tmp_path_factory.mktemp("rabbitmq"), server)
    try:
        yield node.start()
    finally:
        node.stop()
