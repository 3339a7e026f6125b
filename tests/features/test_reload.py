"""``cronsvc worker --reload``: new code runs in a fresh worker, and across each swap no
fire is lost or run twice; code that does not import leaves the old worker running.
Without --reload, a job naming a function the worker's loaded code lacks says to restart.

Real processes: a planner, the supervisor and its worker processes, on a real Redis; the
job's module lives in the test's folder and is rewritten while they run.
"""

from __future__ import annotations

import collections
import json
import re
from pathlib import Path
from typing import Any

import redis

from cronsvc.keys import Keys
from cronsvc.testing import Fleet, history, read_ledger
from tests.support.wait import wait_for

# Each version of the module notes its mark on the ledger, at the start and at the end of
# a run that lasts longer than the job's period: at each swap the old worker has runs to
# finish. The marks differ in length, as edits do.
MODULE = '''import time

from cronsvc.testing.ledger import note


def tick(path, ctx=None):
    note(path, "start", ctx, mark={mark!r})
    time.sleep(1.2)  # the work: runs overlap, a swap always finds some running
    note(path, "end", ctx, mark={mark!r})
'''
MARKS = ("v1", "v22", "v333", "v4444")
SWAP = re.compile(r"code changed: \S*mytasks\.py; new worker pid (\d+) up, old worker pid "
                  r"(\d+) finishing (\d+) run")


def fleet_on(tmp_path: Path, redis_url: str) -> tuple[Fleet, Path]:
    """A fleet whose one job runs ``mytasks:tick`` every second, ``mytasks`` in its own
    folder on the workers' import path."""
    code = tmp_path / "code"
    code.mkdir()
    fleet = Fleet(tmp_path, redis_url, {}, pythonpath=[code])
    fleet.write({"tick": {"every": "1s", "call": "mytasks:tick", "catch_up": "all",
                          "kwargs": {"path": fleet.ledger}}})
    return fleet, code / "mytasks.py"


def processes(redis_url: str, worker: str) -> int:
    """How many processes the presence of ``worker`` counts (0: none told yet)."""
    r = redis.Redis.from_url(redis_url, decode_responses=True)
    try:
        raw = r.hget(Keys().worker_info, worker)
    finally:
        r.close()
    return int(json.loads(raw).get("processes") or 0) if raw else 0


def starts(fleet: Fleet, mark: str | None = None) -> list[dict[str, Any]]:
    return [e for e in read_ledger(fleet.ledger)
            if e["event"] == "start" and mark in (None, e["mark"])]


def test_swaps_lose_no_fire_and_run_none_twice(tmp_path: Path, redis_url: str) -> None:
    fleet, module = fleet_on(tmp_path, redis_url)
    module.write_text(MODULE.format(mark=MARKS[0]))
    with fleet.running(planner=True):
        fleet.worker("w", "--reload")
        wait_for(lambda: len(starts(fleet, MARKS[0])) >= 3, 60, message="v1 runs")
        for n, mark in enumerate(MARKS[1:], 1):
            module.write_text(MODULE.format(mark=mark))
            wait_for(lambda m=mark: len(starts(fleet, m)) >= 3, 60,
                     message=f"{mark} runs\n{fleet.logs()}")
            wait_for(lambda n=n: fleet.log("w").count("old worker pid") >= n,
                     60, message=f"the old worker of swap {n} to stop\n{fleet.logs()}")
    assert fleet.wait("w") == 0
    ledger = read_ledger(fleet.ledger)
    began = [e for e in ledger if e["event"] == "start"]
    ended = collections.Counter(e["fire"] for e in ledger if e["event"] == "end")
    # 0 twice, and every run that began (old workers' too) ran to its end.
    counts = collections.Counter(e["fire"] for e in began)
    assert [f for f, c in counts.items() if c > 1] == []
    assert ended == counts
    # 0 lost: every second from the first fire to the last ran.
    due = sorted(e["scheduled_ms"] for e in began)
    assert [b - a for a, b in zip(due, due[1:], strict=False) if b - a != 1000] == []
    # Each worker process ran one version of the code; the versions came in order, each
    # in a new process, and the last one runs once its swap is done.
    marks = {e["pid"]: {x["mark"] for x in began if x["pid"] == e["pid"]} for e in began}
    assert all(len(m) == 1 for m in marks.values()), marks
    first = {}
    for e in sorted(began, key=lambda e: e["scheduled_ms"]):
        first.setdefault(e["mark"], e["scheduled_ms"])
    assert list(first) == list(MARKS)
    swaps = SWAP.findall(fleet.log("w"))
    assert len(swaps) == 3, fleet.log("w")
    assert all(marks[int(new)] == {mark} for (new, _, _), mark in zip(swaps, MARKS[1:],
                                                                       strict=True))
    assert all(e["mark"] == MARKS[-1] for e in began[-3:])


def test_broken_code_keeps_the_old_worker(tmp_path: Path, redis_url: str) -> None:
    fleet, module = fleet_on(tmp_path, redis_url)
    module.write_text(MODULE.format(mark=MARKS[0]))
    with fleet.running(planner=True):
        fleet.worker("w", "--reload")
        wait_for(lambda: starts(fleet, MARKS[0]), 60, message="v1 runs")
        pid = starts(fleet)[0]["pid"]
        module.write_text("def tick(path, ctx=None)\n    pass\n")  # no colon
        wait_for(lambda: "does not run" in fleet.log("w"), 60,
                 message=f"the broken code to be told\n{fleet.logs()}")
        told = [line for line in fleet.log("w").splitlines() if "does not run" in line]
        assert len(told) == 1 and "code changed: code/mytasks.py; " in told[0]
        assert f"worker pid {pid} runs on: cannot import mytasks:tick: SyntaxError: " \
               "expected ':' (mytasks.py, line 1)" in told[0]
        # The old worker goes on with the old code.
        seen = len(starts(fleet))
        wait_for(lambda: len(starts(fleet)) >= seen + 2, 60, message="runs go on")
        assert {e["pid"] for e in starts(fleet)} == {pid}
        module.write_text(MODULE.format(mark=MARKS[1]))
        wait_for(lambda: starts(fleet, MARKS[1]), 60,
                 message=f"the fixed code to run\n{fleet.logs()}")
    assert "Traceback" not in fleet.log("w")
    assert len(SWAP.findall(fleet.log("w"))) == 1


def test_without_reload_a_new_function_asks_for_a_restart(tmp_path: Path, redis_url: str,
                                                           r: redis.Redis) -> None:
    fleet, module = fleet_on(tmp_path, redis_url)
    module.write_text("def tick(path, ctx=None):\n    pass\n")
    fleet.write({"tick": {"call": "mytasks:tick", "kwargs": {"path": fleet.ledger}}})
    with fleet.running("w", planner=False):
        fleet.trigger("tick")
        wait_for(lambda: history(r, "tick"), 30, message=f"tick runs\n{fleet.logs()}")
        # A function and a job that calls it, added while the worker runs.
        module.write_text(module.read_text() + "\n\ndef boom(ctx=None):\n    pass\n")
        fleet.write({"tick": {"call": "mytasks:tick", "kwargs": {"path": fleet.ledger}},
                     "boom": {"call": "mytasks:boom"}})
        wait_for(lambda: "2 jobs" in fleet.log("w"), 30, message="the file reloads")
        fleet.trigger("boom")
        runs = wait_for(lambda: history(r, "boom"), 30, message=f"boom runs\n{fleet.logs()}")
    assert runs[0]["status"] == "failed"
    assert runs[0]["reason"] == (
        "cannot import mytasks:boom: not in the code this process loaded: restart the "
        "worker to load new code (or run it with --reload)")


def test_code_broken_at_start_waits_for_a_fix(tmp_path: Path, redis_url: str) -> None:
    fleet, module = fleet_on(tmp_path, redis_url)
    module.write_text("import no_such_module_here\n")
    with fleet.running(planner=True):
        sup = fleet.worker("w", "--reload")
        wait_for(lambda: "waiting for a change" in fleet.log("w"), 60,
                 message=f"the broken code to be told\n{fleet.logs()}")
        assert "cannot load the jobs' code: cannot import mytasks:tick: No module named " \
               "'no_such_module_here'; waiting for a change" in fleet.log("w")
        assert sup.poll() is None  # the supervisor waits
        module.write_text(MODULE.format(mark=MARKS[0]))
        wait_for(lambda: starts(fleet, MARKS[0]), 60, message=f"the fix runs\n{fleet.logs()}")
    assert re.search(r"code changed: \S*mytasks\.py; worker pid \d+ up", fleet.log("w"))
    assert "Traceback" not in fleet.log("w")


def test_a_worker_of_several_processes_is_swapped_whole(tmp_path: Path, redis_url: str) -> None:
    fleet, module = fleet_on(tmp_path, redis_url)
    module.write_text(MODULE.format(mark=MARKS[0]))
    with fleet.running(planner=True):
        fleet.worker("w", "--reload", "--processes", "2")
        wait_for(lambda: len(starts(fleet, MARKS[0])) >= 3, 60, message="v1 runs")
        # Up once its first process reported the files it loaded (the other may run
        # fires before): a change from then on is a swap.
        wait_for(lambda: "file(s) of its code" in fleet.log("w"), 60,
                 message=f"the worker to be up\n{fleet.logs()}")
        # Both of its processes imported the code (each tells its presence after it
        # did): one that starts after the change would run the new code under this name.
        wait_for(lambda: processes(redis_url, "w") == 2, 60,
                 message=f"both processes of the worker up\n{fleet.logs()}")
        module.write_text(MODULE.format(mark=MARKS[1]))
        # A swap starts three processes: a supervisor and its two.
        wait_for(lambda: len(starts(fleet, MARKS[1])) >= 3, 120,
                 message="v2 runs")
        wait_for(lambda: "old worker pid" in fleet.log("w"), 60,
                 message=f"the old worker to stop\n{fleet.logs()}")
    assert fleet.wait("w") == 0
    began = starts(fleet)
    counts = collections.Counter(e["fire"] for e in began)
    assert [f for f, c in counts.items() if c > 1] == []
    # Each version ran in the processes of its own worker, the first named w, the next w~2.
    assert {e["worker"].split("/")[0] for e in began if e["mark"] == MARKS[0]} == {"w"}
    assert {e["worker"].split("/")[0] for e in began if e["mark"] == MARKS[1]} == {"w~2"}
    assert {e["worker"].split("/")[1] for e in began} <= {"1", "2"}
