"""Real planner and worker processes for end-to-end tests (and the benchmarks)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import redis
import yaml

from tests.support.paths import ROOT


class Fleet:
    """Starts `python -m cronsvc ...` processes on one config and one Redis."""

    def __init__(self, tmp: Path, redis_url: str, jobs: dict[str, Any], **top: Any) -> None:
        self.tmp = tmp
        self.redis_url = redis_url
        self.config = tmp / "schedules.yaml"
        self.ledger = str(tmp / "ledger.jsonl")
        self.release = str(tmp / "release")
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.write(jobs, **top)

    def write(self, jobs: dict[str, Any], **top: Any) -> None:
        doc = {"jobs": jobs, **top}
        tmp = self.config.with_suffix(".tmp")
        tmp.write_text(yaml.safe_dump(doc, sort_keys=False))
        os.replace(tmp, self.config)  # a reloading planner never sees half a file

    def call_job(self, cron: str, func: str = "record", **options: Any) -> dict[str, Any]:
        kwargs: dict[str, Any] = {"path": self.ledger}
        if func == "block":
            kwargs["release"] = self.release
        return {"cron": cron, "call": f"tests.support.jobs:{func}", "kwargs": kwargs, **options}

    def start(self, role: str, name: str, *args: str) -> subprocess.Popen[bytes]:
        env = dict(os.environ, PYTHONPATH=str(ROOT))
        log = open(self.tmp / f"{name}.log", "ab")  # noqa: SIM115 - closed with the process
        argv = [sys.executable, "-m", "cronsvc", role, "--config", str(self.config),
                "--redis-url", self.redis_url, "--name", name, *args]
        proc = subprocess.Popen(argv, cwd=self.tmp, env=env, stdout=log, stderr=log,
                                stdin=subprocess.DEVNULL)
        log.close()
        self.procs[name] = proc
        return proc

    def planner(self, name: str = "planner", *args: str) -> subprocess.Popen[bytes]:
        return self.start("planner", name, "--tick", "1", *args)

    def worker(self, name: str, *args: str) -> subprocess.Popen[bytes]:
        return self.start("worker", name, *args)

    def client(self) -> Any:
        from cronsvc.client.client import Client

        return Client(self.redis_url, config=str(self.config))

    def trigger(self, job: str) -> str:
        """Publish the file (no planner needed) and run ``job`` once now; its fire id."""
        client = self.client()
        client.publish_config()
        return str(client.trigger(job))

    def signal(self, name: str, sig: int = signal.SIGTERM) -> None:
        self.procs[name].send_signal(sig)

    def wait(self, name: str, timeout: float = 30) -> int:
        return self.procs[name].wait(timeout)

    def log(self, name: str) -> str:
        path = self.tmp / f"{name}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def logs(self) -> str:
        return "\n".join(f"--- {n}\n{self.log(n)[-3000:]}" for n in self.procs)

    @contextmanager
    def running(self, *workers: str, planner: bool = True) -> Iterator[Fleet]:
        """A planner (unless told not) and the ``workers`` named, stopped on exit."""
        if planner:
            self.planner()
        for name in workers:
            self.worker(name)
        try:
            yield self
        finally:
            self.stop_all()

    def stop_all(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.procs.values():
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def published(redis_url: str, config: str | Path) -> Any:
    """A Client on ``config`` whose jobs are published (no planner needed)."""
    from cronsvc.client.client import Client

    client = Client(redis_url, config=str(config))
    client.publish_config()
    return client


def history(client: redis.Redis, job: str, key: str | None = None) -> list[dict[str, Any]]:
    """The job's history, oldest first."""
    from cronsvc.keys import Keys

    raw = client.lrange(key or Keys().history(job), 0, -1)
    return [json.loads(x) for x in reversed(raw)]
