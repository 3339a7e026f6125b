"""A worker rides out a Redis restart: running jobs keep running, results are kept."""

from __future__ import annotations

from pathlib import Path

import pytest
import redis

from cronsvc.keys import Keys
from cronsvc.testing import BLOCK, Fleet, history, read_ledger
from tests.support.wait import wait_for

pytestmark = pytest.mark.slow


def test_worker_keeps_a_result_across_a_redis_restart(tmp_path: Path, fresh_server) -> None:  # type: ignore[no-untyped-def]
    server = fresh_server(appendfsync="always")
    r = redis.Redis.from_url(server.url, decode_responses=True)
    f = Fleet(tmp_path, server.url, {})
    try:
        f.write({"slow": f.call_job("0 0 1 1 *", call=BLOCK),
                 "quick": f.call_job("0 0 1 1 *")})
        f.worker("worker-a", "--lease", "60")
        fid = f.trigger("slow")
        wait_for(lambda: read_ledger(f.ledger), message="the run to start")
        server.kill()
        Path(f.release).touch()  # the run ends while Redis is down
        wait_for(lambda: "cannot record a result yet" in f.log("worker-a"),
                 message="the worker to retry its result")
        server.start()
        done = wait_for(lambda: history(r, "slow"), message="the result to be recorded")
        assert [(h["fire"], h["status"], h["attempt"]) for h in done] == [(fid, "ok", 1)]
        assert r.zcard(Keys().working) == 0
        # And the worker claims again after the outage.
        f.trigger("quick")
        wait_for(lambda: history(r, "quick"), message="a run after the restart")
        assert f.procs["worker-a"].poll() is None, f.logs()
    finally:
        f.stop_all()
