"""Metrics listen on loopback unless --metrics-host (or $CRONSVC_METRICS_HOST) opens them:
they name jobs, hosts and queues, which is for whoever the operator chooses."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from cronsvc.testing import Fleet
from tests.support.metrics import scrape, value
from tests.support.wait import wait_for

pytestmark = pytest.mark.slow

#: What a process logs when it serves metrics: the address and the port.
SAID = r"metrics on http://(\S+):(\d+)/metrics"


def listening_on(port: int) -> set[str]:
    """The IPv4 addresses a TCP socket listens on ``port`` at, from /proc/net/tcp."""
    found = set()
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        local, state = line.split()[1], line.split()[3]
        addr, hex_port = local.split(":")
        if state == "0A" and int(hex_port, 16) == port:  # 0A: LISTEN
            found.add(".".join(str(int(addr[i:i + 2], 16)) for i in (6, 4, 2, 0)))
    return found


def test_metrics_listen_on_loopback_unless_told(tmp_path: Path, redis_url: str) -> None:
    fleet = Fleet(tmp_path, redis_url, {"tick": {"cron": "0 3 * * *", "command": ["true"]}})
    try:
        fleet.planner("planner", "--metrics-port", "0")
        fleet.worker("w1", "--metrics-port", "0", "--metrics-host", "0.0.0.0")
        ((host, port),) = wait_for(lambda: re.findall(SAID, fleet.log("planner")),
                                   message="the planner's metrics address")
        assert host == "127.0.0.1" and listening_on(int(port)) == {"127.0.0.1"}
        # Served there (the count appears with the planner's first tick, which may follow
        # the line that says where).
        wait_for(lambda: value(scrape(int(port)), "cronsvc_planner_ticks_total") is not None,
                 message="the planner's ticks counted on its loopback metrics")
        ((host, port),) = wait_for(lambda: re.findall(SAID, fleet.log("w1")),
                                   message="the worker's metrics address")
        assert host == "0.0.0.0" and listening_on(int(port)) == {"0.0.0.0"}
    finally:
        fleet.stop_all()

