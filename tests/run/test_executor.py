"""cronsvc.kinds.execute, running both kinds, with real subprocesses and real threads."""

from __future__ import annotations

import json
import os
import shlex
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from cronsvc import current
from cronsvc.clock import FixedClock
from cronsvc.kinds import execute
from cronsvc.run import processes
from cronsvc.run.context import FireContext
from cronsvc.run.outcome import OUTPUT_CAP, Outcome, Stop
from cronsvc.run.watchdog import Leash, Watchdog
from tests.support import calls
from tests.support.output import numbered, split_at_gap
from tests.support.wait import wait_for

PY = sys.executable
DUE_MS = 1_700_000_000_000  # 2023-11-14T22:13:20Z
CTX = FireContext(job="t", fire_id=f"t@{DUE_MS}", scheduled_ms=DUE_MS, attempt=2, worker="w1")


try:
    from cronsvc.config.models import Job
except ImportError:  # config.py lands separately; the executor only reads attributes

    @dataclass(frozen=True)
    class Job:  # type: ignore[no-redef]
        name: str
        cron: str
        command: Any = None
        shell: bool = False
        call: str | None = None
        args: Any = ()
        kwargs: dict[str, Any] = field(default_factory=dict)
        env: dict[str, str] = field(default_factory=dict)
        cwd: str | None = None
        timeout: float | None = None

        def __post_init__(self) -> None:
            cmd = self.command
            if isinstance(cmd, str):
                cmd = [cmd] if self.shell else shlex.split(cmd)
            object.__setattr__(self, "command", None if cmd is None else tuple(cmd))
            object.__setattr__(self, "args", tuple(self.args))


def make_job(**fields: Any) -> Job:
    return Job(**{"name": "t", "cron": "* * * * *", **fields})


def py(code: str, **fields: Any) -> Job:
    return make_job(command=[PY, "-c", code], **fields)


def run(job: Job, ctx: FireContext = CTX, **kw: Any) -> Outcome:
    return execute(job, ctx, **kw)


def alive(pid: int) -> bool:
    """A zombie counts as gone: it is dead, merely not reaped by its new parent yet."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    except OSError:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return True
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def read_pids(path: Path) -> list[int]:
    return [int(x) for x in path.read_text().split()] if path.exists() else []


# A shell with a background child and a background subshell that has its own child:
# three pids, written to a file, all of them in the job's process group.
TREE = (
    "sleep 1000 & echo $! >> {pids}; "
    "(sleep 1000 & echo $! >> {pids}; wait) & echo $! >> {pids}; "
    "wait"
)


# -- command jobs --------------------------------------------------------------
@pytest.fixture(params=["pidfd", "no pidfd"])
def exits(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """A command's exit is seen on its pidfd, or, as on a system without pidfd_open, by a
    thread blocked in waitpid: the same results either way."""
    if request.param == "no pidfd":
        monkeypatch.delattr(os, "pidfd_open")


@pytest.mark.usefixtures("exits")
@pytest.mark.parametrize(("code", "status", "exit_code"), [
    ("print('hi')", "ok", 0),
    ("import sys; sys.exit(3)", "failed", 3),
    ("import os, signal; os.kill(os.getpid(), signal.SIGKILL)", "failed", -9),
])
def test_exit_status(code: str, status: str, exit_code: int) -> None:
    out = run(py(code), clock=FixedClock(123))
    assert (out.status, out.exit_code) == (status, exit_code)
    assert out.started_ms == 123
    assert out.duration_ms >= 0
    assert (out.error is None) == (status == "ok")
    if exit_code == -9:
        assert out.error == "killed by SIGKILL"


def test_argv_is_not_shell_interpreted() -> None:
    out = run(make_job(command=["echo", "$HOME and  spaces", "*"]))
    assert out.status == "ok"
    assert out.output == "$HOME and  spaces *\n"


def test_shell_true_runs_through_sh() -> None:
    out = run(make_job(command="echo $GREETING | tr a-z A-Z; exit 4", shell=True,
                       env={"GREETING": "hello"}))
    assert (out.status, out.exit_code, out.output) == ("failed", 4, "HELLO\n")


def test_env_cwd_and_merged_stderr(tmp_path: Path) -> None:
    code = "import os, sys; print(os.environ['FOO'], os.getcwd()); print('err', file=sys.stderr)"
    out = run(py(code, env={"FOO": "bar"}, cwd=str(tmp_path)))
    assert out.status == "ok"
    assert out.output.splitlines() == [f"bar {tmp_path}", "err"]


def test_os_environ_is_inherited(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CRONSVC_TEST_INHERITED", "yes")
    out = run(py("import os; print(os.environ['CRONSVC_TEST_INHERITED'])"))
    assert out.output == "yes\n"


def test_os_environ_is_inherited_as_it_is_at_each_start(monkeypatch: pytest.MonkeyPatch) -> None:
    shown = py("import os; print(os.environ.get('CRONSVC_TEST_CHANGED', '-'))")
    monkeypatch.setenv("CRONSVC_TEST_CHANGED", "one")
    assert run(shown).output == "one\n"
    monkeypatch.setenv("CRONSVC_TEST_CHANGED", "two")
    assert run(shown).output == "two\n"
    monkeypatch.delenv("CRONSVC_TEST_CHANGED")
    assert run(shown).output == "-\n"


def test_cronsvc_variables_arrive() -> None:
    ctx = FireContext(job="t", fire_id=f"t@{DUE_MS}#tabc123", scheduled_ms=DUE_MS + 5,
                      attempt=3, worker="host:42", payload={"a": [1, "x"]})
    code = ("import json, os; print(json.dumps({k: v for k, v in os.environ.items()"
            " if k.startswith('CRONSVC_')}))")
    # A job's own env cannot override its identity.
    out = run(py(code, env={"CRONSVC_JOB": "fake"}), ctx)
    assert json.loads(out.output) == {
        "CRONSVC_JOB": "t",
        "CRONSVC_FIRE_ID": f"t@{DUE_MS}#tabc123",
        "CRONSVC_SCHEDULED_AT": "2023-11-14T22:13:20.005Z",
        "CRONSVC_ATTEMPT": "3",
        "CRONSVC_WORKER": "host:42",
        "CRONSVC_PAYLOAD": '{"a": [1, "x"]}',
    }


def test_env_without_payload() -> None:
    assert CTX.env() == {
        "CRONSVC_JOB": "t",
        "CRONSVC_FIRE_ID": f"t@{DUE_MS}",
        "CRONSVC_SCHEDULED_AT": "2023-11-14T22:13:20Z",
        "CRONSVC_ATTEMPT": "2",
        "CRONSVC_WORKER": "w1",
    }


@pytest.mark.usefixtures("exits")
def test_output_keeps_head_and_tail_with_the_gap_said() -> None:
    # The first line, written on stderr before a flood on stdout, stays.
    out = run(py("import sys; sys.stderr.write('ERROR: first\\n'); sys.stderr.flush()\n"
                 "for i in range(1, 20001): print(i)", output="4KiB"))
    assert out.status == "ok"
    assert out.output.startswith("ERROR: first\n1\n2\n3\n")
    assert out.output.endswith("\n19999\n20000\n")
    printed = len("ERROR: first\n") + sum(len(f"{i}\n") for i in range(1, 20001))
    head, tail, left_out = split_at_gap(out.output)
    # Whole lines on both sides, about half the size each; the gap counts the rest.
    assert len(head.encode()) + len(tail.encode()) + left_out == printed
    assert 4096 - 16 <= len(head.encode()) + len(tail.encode()) <= 4096
    assert numbered(head.removeprefix("ERROR: first\n"), tail, 20000)


def test_output_within_its_size_is_kept_whole() -> None:
    out = run(py("for i in range(1000): print(i)", output="64KiB"))
    assert out.output == "".join(f"{i}\n" for i in range(1000))


@pytest.mark.parametrize("text", ["\u00e9" * 5000, "\u20ac" * 3000 + "\U0001f600" * 2000])
def test_head_and_tail_do_not_cut_a_character(text: str) -> None:
    out = run(py(f"print({text!r})", output="1KiB"))
    assert "\ufffd" not in out.output
    head, gap, tail = out.output.partition(" bytes left out ...\n")
    first, _, count = head.rpartition("\n... ")
    assert count.isdigit() and set(first + tail) - set(text) == {"\n"}


@pytest.mark.usefixtures("exits")
def test_timeout_kills_the_whole_process_tree(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    out = run(make_job(command=TREE.format(pids=pids), shell=True, timeout=0.5))
    assert out.status == "timeout"
    assert out.error == "timed out after 0.5s"
    children = read_pids(pids)
    assert len(children) == 3
    wait_for(lambda: not any(alive(p) for p in children), message="the job's children to die")


@pytest.mark.usefixtures("exits")
def test_sigterm_ignored_escalates_to_sigkill(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(processes, "KILL_GRACE", 0.2)
    code = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(1000)"
    out = run(py(code, timeout=0.5))
    assert (out.status, out.exit_code) == ("timeout", -9)


def test_cancel_kills_the_whole_process_tree(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    cancel = threading.Event()

    def cancel_when_started() -> None:
        wait_for(lambda: len(read_pids(pids)) == 3, message="the job to start its children")
        cancel.set()

    helper = threading.Thread(target=cancel_when_started, daemon=True)
    helper.start()
    out = run(make_job(command=TREE.format(pids=pids), shell=True), cancel=cancel)
    helper.join()
    assert (out.status, out.error) == ("cancelled", "cancelled")
    children = read_pids(pids)
    wait_for(lambda: not any(alive(p) for p in children), message="the job's children to die")


def test_cancel_set_before_start_runs_nothing(tmp_path: Path) -> None:
    cancel = threading.Event()
    cancel.set()
    marker = tmp_path / "ran"
    out = run(make_job(command=["touch", str(marker)]), cancel=cancel)
    assert out.status == "cancelled"
    assert not marker.exists()


def test_command_not_found() -> None:
    out = run(make_job(command=["no-such-command-cronsvc", "x"]))
    assert (out.status, out.exit_code) == ("failed", None)
    assert out.error == "command not found: no-such-command-cronsvc"


def test_a_program_gone_from_where_it_was_found_is_looked_for_again(tmp_path: Path) -> None:
    # Where a program was found on its PATH is kept a while: once it is not there, the
    # command still runs the one the PATH has now.
    first, second = tmp_path / "first", tmp_path / "second"
    env = {**os.environ, "PATH": f"{first}:{second}", "CRONSVC_FIRE_ID": "t@1",
           "CRONSVC_ATTEMPT": "1"}

    def put(where: Path, says: str) -> None:
        where.mkdir(exist_ok=True)
        (where / "cronsvc-says").write_text(f"#!/bin/sh\necho {says}\n")
        (where / "cronsvc-says").chmod(0o755)

    dog = Watchdog()
    dog.start()
    try:
        def says() -> str:
            leash = Leash(dog, lambda: time.monotonic() + 60)
            return processes.run_group(["cronsvc-says"], None, dict(env),
                                       Stop(threading.Event(), guard=leash)).output
        put(first, "first")
        assert says() == "first\n"
        (first / "cronsvc-says").unlink()
        put(second, "second")
        assert says() == "second\n"
    finally:
        dog.close()


def test_program_not_executable(tmp_path: Path) -> None:
    script = tmp_path / "job.sh"
    script.write_text("#!/bin/sh\necho hi\n")  # no x bit
    out = run(make_job(command=["./job.sh"], cwd=str(tmp_path)))
    assert (out.status, out.error) == ("failed", "permission denied: ./job.sh")
    script.chmod(0o755)
    assert run(make_job(command=["./job.sh"], cwd=str(tmp_path))).output == "hi\n"



def test_missing_cwd(tmp_path: Path) -> None:
    missing = str(tmp_path / "nope")
    out = run(make_job(command=["true"], cwd=missing))
    assert out.status == "failed"
    assert out.error is not None and out.error.startswith(f"cannot change to directory {missing}")


# -- call jobs -----------------------------------------------------------------
def test_call_with_args_and_kwargs() -> None:
    out = run(make_job(call="tests.support.calls:add", args=[2, 3], kwargs={"scale": 10}),
              clock=FixedClock(7))
    assert (out.status, out.output, out.error, out.exit_code) == ("ok", "50", None, None)
    assert out.started_ms == 7


def test_call_receives_ctx_keyword() -> None:
    out = run(make_job(call="tests.support.calls:with_ctx", args=["s"]))
    assert out.output == repr(f"t@{DUE_MS}/2/s")


def test_call_sees_context_through_contextvar() -> None:
    ctx = FireContext(job="t", fire_id="t@1#tzzzzzz", scheduled_ms=1, attempt=1, payload=[1])
    out = run(make_job(call="tests.support.calls:from_current"), ctx)
    assert out.output == repr({"job": "t", "payload": [1]})
    assert current() is None  # set only inside the call's own thread


def test_call_returning_none_or_a_lot() -> None:
    assert run(make_job(call="tests.support.calls:nothing")).output == ""
    out = run(make_job(call="tests.support.calls:big"))
    assert out.status == "ok"
    assert len(out.output) == OUTPUT_CAP and out.output.endswith("...")


def test_call_exception() -> None:
    out = run(make_job(call="tests.support.calls:boom"))
    assert (out.status, out.error) == ("failed", "ValueError: bad thing happened")
    assert "Traceback" in out.output and "in boom" in out.output


def test_call_timeout_asks_the_call_to_stop() -> None:
    calls.SAW_STOP.clear()
    out = run(make_job(call="tests.support.calls:until_stopped", timeout=0.5))
    assert (out.status, out.error) == ("timeout", "timed out after 0.5s")
    assert calls.SAW_STOP.wait(10)


def test_call_runs_in_its_own_thread_only_when_it_has_a_timeout() -> None:
    # Without a timeout nothing could stop it early: it runs in the caller's thread.
    here = run(make_job(call="tests.support.calls:thread_name")).output
    assert here == repr(threading.current_thread().name)
    timed = run(make_job(call="tests.support.calls:thread_name", timeout=5)).output
    assert timed.startswith("'cronsvc-call-")


def test_call_cancel() -> None:
    calls.STARTED.clear()
    calls.SAW_STOP.clear()
    cancel = threading.Event()
    helper = threading.Thread(target=lambda: calls.STARTED.wait(10) and cancel.set())
    helper.start()
    out = run(make_job(call="tests.support.calls:until_stopped"), cancel=cancel)
    helper.join()
    assert (out.status, out.error) == ("cancelled", "cancelled")
    assert calls.SAW_STOP.wait(10)


@pytest.mark.parametrize("cancelled", [False, True])
def test_call_without_timeout_reports_the_same_through_run_and_execute(
        cancelled: bool) -> None:
    # execute runs an untimed call through run_untimed, with no Stop; the kind's run, given
    # a Stop without a deadline (nor an output), reports the same.
    from cronsvc.kinds.call import KIND
    from cronsvc.run.outcome import Stop

    job = make_job(call="tests.support.calls:add", args=[2, 3])
    cancel = threading.Event()
    if cancelled:  # set while it runs: seen when it returns
        job = make_job(call="tests.support.calls:set_event", args=[cancel])
    out = run(job, cancel=cancel)
    cancel.clear()
    res = KIND.run(job, CTX, Stop(cancel=cancel))
    assert (out.status, out.error, out.output) == (res.status, res.error, res.output)
    assert (out.status, out.error) == (("cancelled", "cancelled") if cancelled
                                       else ("ok", None))


@pytest.mark.parametrize(("path", "error"), [
    ("nosuchmod_cronsvc.tasks:ping",
     "cannot import nosuchmod_cronsvc.tasks:ping: No module named 'nosuchmod_cronsvc'"),
    ("tests.support.calls:nope",  # a module this process imported before: new code?
     "cannot import tests.support.calls:nope: not in the code this process loaded: "
     "restart the worker to load new code (or run it with --reload)"),
    ("tests.support.calls:NOT_CALLABLE",
     "tests.support.calls:NOT_CALLABLE is not callable (type int)"),
])
def test_call_bad_import_path(path: str, error: str) -> None:
    out = run(make_job(call=path))
    assert (out.status, out.error, out.exit_code) == ("failed", error, None)


class Chunks:
    """A feed that keeps what it is told."""

    def __init__(self) -> None:
        self.parts: list[bytes] = []

    def add(self, chunk: bytes) -> None:
        self.parts.append(chunk)


@pytest.mark.parametrize("job", [
    py("import sys; print('one'); sys.stdout.flush(); print('two')"),
    make_job(call="builtins:print", args=["one\ntwo"]),
], ids=["command", "call"])
@pytest.mark.usefixtures("exits")
def test_a_runs_output_is_fed_as_it_comes_all_of_it(job: Job) -> None:
    feed = Chunks()
    out = run(job, feed=feed)
    assert out.output == "one\ntwo\n" == b"".join(feed.parts).decode()
