"""Real planner and worker processes on one job file and one Redis: what a fleet does,
seen from outside, the way an operator would see it.

Each role is ``python -m cronsvc planner|worker``, started with the test's interpreter
and its import path (:mod:`cronsvc.testing.children`), so a job file may name the test
project's own functions. Logs go to ``<tmp>/<name>.log``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import redis
import yaml

from cronsvc.client.client import Client
from cronsvc.keys import Keys
from cronsvc.testing.children import child_env
from cronsvc.testing.ledger import RECORD, release_of


class Fleet:
    """``python -m cronsvc ...`` processes on ``tmp/schedules.yaml`` (written from
    ``jobs`` and the file's top-level sections ``top``) and ``redis_url``.
    ``pythonpath`` goes before the test's own import path in the processes'."""

    def __init__(self, tmp: Path, redis_url: str, jobs: dict[str, Any], *,
                 pythonpath: Iterable[str | os.PathLike[str]] = (), **top: Any) -> None:
        self.tmp = tmp
        self.redis_url = redis_url
        self.config = tmp / "schedules.yaml"
        self.ledger = str(tmp / "ledger.jsonl")
        self.release = release_of(self.ledger)
        self.env = child_env(pythonpath)
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.write(jobs, **top)
        for made in _WATCHING:  # (held to the block's end, even if the caller drops it)
            made.append(self)

    def write(self, jobs: dict[str, Any], **top: Any) -> None:
        """Replace the job file; a running planner reloads it on its next tick."""
        doc = {"jobs": jobs, **top}
        tmp = self.config.with_suffix(".tmp")
        tmp.write_text(yaml.safe_dump(doc, sort_keys=False))
        os.replace(tmp, self.config)  # a reloading planner never sees half a file

    def call_job(self, cron: str, call: str = RECORD, **options: Any) -> dict[str, Any]:
        """A ``call`` job of ``call`` (a function taking the ledger's ``path``, such as
        those of :mod:`cronsvc.testing.ledger`) on ``cron``, with ``options``."""
        return {"cron": cron, "call": call, "kwargs": {"path": self.ledger}, **options}

    def start(self, role: str, name: str, *args: str) -> subprocess.Popen[bytes]:
        """``python -m cronsvc <role> --name <name> <args>`` on the file and the Redis; a
        worker of one process (``--processes 1``) unless ``args`` say how many."""
        if role == "worker" and not any(a.startswith(("--processes", "-p")) for a in args):
            args = (*args, "--processes", "1")
        log = open(self.tmp / f"{name}.log", "ab")  # noqa: SIM115 - closed with the process
        argv = [sys.executable, "-m", "cronsvc", role, "--config", str(self.config),
                "--redis-url", self.redis_url, "--name", name, *args]
        proc = subprocess.Popen(argv, cwd=self.tmp, env=self.env, stdout=log, stderr=log,
                                stdin=subprocess.DEVNULL)
        log.close()
        self.procs[name] = proc
        return proc

    def planner(self, name: str = "planner", *args: str) -> subprocess.Popen[bytes]:
        """A planner that ticks every second (the default is a minute)."""
        return self.start("planner", name, "--tick", "1", *args)

    def worker(self, name: str, *args: str) -> subprocess.Popen[bytes]:
        return self.start("worker", name, *args)

    def client(self) -> Client:
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
        """The end of every process's log, to print beside a failed check."""
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
        """SIGTERM to every process still running (they finish their runs), SIGKILL to
        one that has not stopped after 30 s."""
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.procs.values():
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


#: The fleets made in each :func:`fleets_stopped` block under way, outermost first.
_WATCHING: list[list[Fleet]] = []


@contextmanager
def fleets_stopped() -> Iterator[None]:
    """Every :class:`Fleet` made inside stopped (:meth:`Fleet.stop_all`) at the end, however
    the block ends: a test that fails before its own ``stop_all`` must not leave a planner
    publishing its job file into the next test's Redis."""
    made: list[Fleet] = []
    _WATCHING.append(made)
    try:
        yield
    finally:
        # (by identity: list.remove would take the first equal list, an empty one alike)
        del _WATCHING[[m is made for m in _WATCHING].index(True)]
        for fleet in made:
            fleet.stop_all()


def published(redis_url: str, config: str | Path) -> Client:
    """A Client on ``config`` whose jobs are published (no planner needed)."""
    client = Client(redis_url, config=str(config))
    client.publish_config()
    return client


def history(client: redis.Redis, job: str, key: str | None = None) -> list[dict[str, Any]]:
    """The job's history records (what each run ended as), oldest first."""
    raw = client.lrange(key or Keys().history(job), 0, -1)
    return [json.loads(x) for x in reversed(raw)]
