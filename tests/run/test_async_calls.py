"""``call`` jobs in the test process: async targets awaited on the loop (stopped by their
timeout or a cancel, their ``finally`` run), and what calls print and log kept per run."""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Any

from cronsvc.config.models import Job
from cronsvc.kinds import execute, launch, runs_async
from cronsvc.run.capture import OutsideRuns, log_line
from cronsvc.run.context import FireContext
from cronsvc.run.outcome import OUTPUT_CAP, Outcome
from cronsvc.run.within import RUN, InRun
from cronsvc.testing.ledger import read_ledger
from tests.support.wait import wait_for

S = "tests.support.async_calls"


def job(call: str, **fields: Any) -> Job:
    return Job(**{"name": "t", "cron": "* * * * *", "call": f"{S}:{call}", **fields})


def ctx(n: int = 1) -> FireContext:
    return FireContext(job="t", fire_id=f"t@{n}", scheduled_ms=n, attempt=1, worker="w")


class Launched:
    """An async run started with :func:`launch`, and its outcome once it ends."""

    def __init__(self, j: Job, c: FireContext) -> None:
        self.done = threading.Event()
        self.outcome: Outcome | None = None
        self.cancel = threading.Event()
        self.stop = launch(j, c, self.cancel, self._ended)

    def _ended(self, outcome: Outcome) -> None:
        self.outcome = outcome
        self.done.set()

    def result(self) -> Outcome:
        wait_for(self.done.is_set, message="the async run to end")
        assert self.outcome is not None
        return self.outcome


def events(ledger: Path, fire: str) -> list[str]:
    return [e["event"] for e in read_ledger(ledger) if e["fire"] == fire]


def test_an_async_target_is_awaited_and_sees_its_fire() -> None:
    assert runs_async(job("returns"))
    out = Launched(job("returns"), ctx()).result()
    assert (out.status, out.output) == ("ok", "{'fire': 't@1', 'current': True}")


def test_a_timeout_cancels_the_task_and_its_finally_runs(tmp_path: Path) -> None:
    ledger = tmp_path / "ledger"
    j = job("held", timeout=0.3, kwargs={"path": str(ledger), "releases": str(tmp_path)})
    out = Launched(j, ctx()).result()
    assert (out.status, out.error) == ("timeout", "timed out after 0.3s")
    assert events(ledger, "t@1") == ["start", "cancelled", "finally"]
    assert [e["stopping"] for e in read_ledger(ledger) if e["event"] == "cancelled"] == [True]


def test_a_cancel_cancels_the_task(tmp_path: Path) -> None:
    ledger = tmp_path / "ledger"
    j = job("held", kwargs={"path": str(ledger), "releases": str(tmp_path)})
    run = Launched(j, ctx())
    wait_for(lambda: events(ledger, "t@1") == ["start"], message="the run to start")
    run.cancel.set()
    run.stop()
    assert run.result().status == "cancelled"
    assert events(ledger, "t@1") == ["start", "cancelled", "finally"]


def test_a_cancel_before_the_task_starts_runs_nothing(tmp_path: Path) -> None:
    ledger = tmp_path / "ledger"
    cancel = threading.Event()
    cancel.set()
    done: list[Outcome] = []
    launch(job("held", kwargs={"path": str(ledger), "releases": str(tmp_path)}), ctx(),
           cancel, done.append)
    assert [o.status for o in done] == ["cancelled"]
    assert not ledger.exists()


def test_an_async_failure_keeps_what_it_printed_and_its_traceback() -> None:
    out = Launched(job("boom"), ctx()).result()
    assert (out.status, out.error) == ("failed", "ValueError: async bad thing")
    assert out.output.startswith("about to fail\nTraceback")
    assert out.output.rstrip().endswith("ValueError: async bad thing")


def test_a_partial_of_an_async_function_is_async_and_a_returned_coroutine_is_awaited() -> None:
    assert runs_async(job("partial_double"))
    assert Launched(job("partial_double"), ctx()).result().output == "42"
    assert not runs_async(job("returns_coroutine"))
    out = execute(job("returns_coroutine"), ctx())
    assert (out.status, out.output) == ("ok", "10")


def _lines(output: str) -> set[str]:
    return set(output.splitlines())


def _chatter(tag: str) -> set[str]:
    return {f"{tag}: printed", f"{tag}: to stderr", f"WARNING tests.jobs: {tag}: logged",
            f"rows tag={tag} n=42", f"{tag}: after the wait", repr(tag)}


def test_two_concurrent_async_calls_keep_their_output_apart(tmp_path: Path) -> None:
    release = tmp_path / "release"
    ledger = tmp_path / "ledger"
    runs = [Launched(job("chatty", kwargs={"tag": tag, "release": str(release),
                                            "path": str(ledger)}), ctx(n))
            for n, tag in enumerate(("a", "b"), 1)]
    wait_for(lambda: len(read_ledger(ledger)) == 2, message="both to be waiting")
    release.touch()
    for run, tag in zip(runs, ("a", "b"), strict=True):
        assert _lines(run.result().output) == _chatter(tag)


def test_two_concurrent_sync_calls_keep_their_output_apart(tmp_path: Path) -> None:
    release = tmp_path / "release"
    ledger = tmp_path / "ledger"
    got: dict[str, Outcome] = {}

    def one(n: int, tag: str) -> None:
        got[tag] = execute(job("chatty_sync", kwargs={"tag": tag, "release": str(release),
                                                       "path": str(ledger)}), ctx(n))

    threads = [threading.Thread(target=one, args=(n, tag)) for n, tag in ((1, "a"), (2, "b"))]
    for t in threads:
        t.start()
    wait_for(lambda: len(read_ledger(ledger)) == 2, message="both to be waiting")
    release.touch()
    for t in threads:
        t.join()
    assert {tag: _lines(o.output) for tag, o in got.items()} == {
        "a": _chatter("a"), "b": _chatter("b")}


def test_a_run_keeps_the_head_and_tail_of_what_it_printed() -> None:
    j = Job(name="t", cron="* * * * *", call="builtins:print", output=OUTPUT_CAP,
            args=["START" + "x" * (3 * OUTPUT_CAP) + "END"])
    out = execute(j, ctx())
    assert out.output.startswith("START") and out.output.endswith("END\n")
    assert f"\n... {2 * OUTPUT_CAP + 9} bytes left out ...\n" in out.output


def test_records_of_a_run_stay_out_of_the_workers_handlers() -> None:
    seen: list[str] = []

    class Seen(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            seen.append(record.getMessage())

    handler = Seen()
    handler.addFilter(OutsideRuns())
    logger = logging.getLogger("tests.jobs")
    logger.addHandler(handler)
    try:
        out = execute(job("chatty_sync", kwargs={"tag": "a", "release": "/"}), ctx())
        logger.warning("outside a run")
    finally:
        logger.removeHandler(handler)
    assert "WARNING tests.jobs: a: logged" in out.output
    assert seen == ["outside a run"]


def test_ctx_log_writes_one_line_with_quoted_values_where_needed() -> None:
    class Out:
        text = ""

        def write(self, s: str) -> None:
            self.text += s

    out = Out()
    token = RUN.set(InRun(None, None, out))  # type: ignore[arg-type]
    try:
        log_line("rows", {"n": 42, "table": "users", "note": "two words", "ok": True})
    finally:
        RUN.reset(token)
    assert out.text == 'rows n=42 table=users note="two words" ok=true\n'
