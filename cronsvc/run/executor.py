"""Runs one job and returns an :class:`Outcome`. Knows nothing of Redis.

`command` jobs run as a child process in a process group of their own, so a
timeout or a cancel can kill the whole tree: SIGTERM to the group, then
SIGKILL after :data:`KILL_GRACE` seconds. Their stdout and stderr are merged;
the last :data:`OUTPUT_CAP` bytes are kept. A :class:`Guard` given to
:func:`execute` learns the group as soon as it exists and when it has ended
(the worker hands it to its watchdog, see :mod:`cronsvc.run.watchdog`).

`call` jobs run a Python callable (see :mod:`cronsvc.run.calls`). With a
timeout, in a thread of its own: a timeout or cancel is reported at once, but
the thread cannot be killed and is left to finish on its own. Without one, in
the caller's thread, which saves a thread per run: a cancel is reported when
the call returns. Cooperative callables poll :func:`cronsvc.stopping` either way.

:func:`execute` never raises: every problem becomes a "failed" outcome.
"""

from __future__ import annotations

import functools
import os
import select
import shutil
import signal
import subprocess
import threading
import time
from dataclasses import dataclass
from typing import IO, Any, Literal, NamedTuple, Protocol

from cronsvc.clock import SYSTEM, Clock, monotonic
from cronsvc.run.calls import OUTPUT_CAP, call_here, start_call
from cronsvc.run.context import FireContext

Status = Literal["ok", "failed", "timeout", "cancelled"]

KILL_GRACE = 2.0  # seconds between SIGTERM and SIGKILL of a command's process group
EOF_GRACE = 1.0  # how long output is still read after the command itself has exited
SLICE = 0.1  # how often a wait looks at the cancel event


@dataclass(frozen=True)
class Outcome:
    """The result of one run.

    `exit_code` is the process's return code (negative: killed by that signal),
    None for call jobs and commands that could not start. `output` is the tail
    of the output (commands) or the repr of the return value or the traceback
    (calls). `error` is a one-line reason when the status is not "ok".
    """

    status: Status
    started_ms: int
    duration_ms: int
    exit_code: int | None = None
    output: str = ""
    error: str | None = None


class Guard(Protocol):
    """Told the process group of a command once it runs, and once it has ended."""

    def started(self, pgid: int) -> None: ...

    def ended(self, pgid: int) -> None: ...


class _Result(NamedTuple):
    status: Status
    exit_code: int | None = None
    output: str = ""
    error: str | None = None


def execute(
    job: Any, ctx: FireContext, cancel: threading.Event | None = None, clock: Clock = SYSTEM,
    guard: Guard | None = None,
) -> Outcome:
    """Run `job` (a `cronsvc.config.models.Job`, or anything with its attributes) once.

    Returns when the job has finished, timed out (`job.timeout` seconds) or
    `cancel` was set; the status says which.
    """
    started_ms = clock.now_ms()
    t0 = monotonic()
    cancel = cancel if cancel is not None else threading.Event()
    deadline = None if job.timeout is None else t0 + job.timeout
    try:
        if cancel.is_set():
            result = _Result("cancelled", error="cancelled before start")
        elif job.call is not None:
            result = _run_call(job, ctx, cancel, deadline)
        elif job.command:
            result = _run_command(job, ctx, cancel, deadline, guard)
        else:
            result = _Result("failed", error=f"job {job.name} has neither command nor call")
    except Exception as exc:  # a worker thread must get an outcome, whatever went wrong
        result = _Result("failed", error=f"{type(exc).__name__}: {exc}")
    duration_ms = int((monotonic() - t0) * 1000)
    return Outcome(result.status, started_ms, duration_ms, *result[1:])


def _wait(done: threading.Event, cancel: threading.Event, deadline: float | None) -> str:
    """Block until `done`, a cancel or the deadline; returns "done", "cancelled" or "timeout"."""
    while True:
        remaining = None if deadline is None else deadline - monotonic()
        if done.wait(SLICE if remaining is None else max(min(SLICE, remaining), 0)):
            return "done"
        if cancel.is_set():
            return "cancelled"
        if deadline is not None and monotonic() >= deadline:
            return "timeout"


def _stopped(how: str, timeout: float | None) -> _Result:
    if how == "timeout":
        return _Result("timeout", error=f"timed out after {timeout:g}s")
    return _Result("cancelled", error="cancelled")


def _run_call(
    job: Any, ctx: FireContext, cancel: threading.Event, deadline: float | None
) -> _Result:
    if deadline is None:
        # No timeout: the call runs here, and a cancel is seen when it returns (or
        # through stopping(), which the cancel event drives).
        res = call_here(job, ctx, cancel)
        if cancel.is_set():
            return _stopped("cancelled", None)
        return _Result("ok" if res.ok else "failed", None, res.output, res.error)
    stop = threading.Event()
    done, box = start_call(job, ctx, stop)
    how = _wait(done, cancel, deadline)
    if how != "done":
        stop.set()  # for callables that poll stopping(); the thread itself lives on
        return _stopped(how, job.timeout)
    res = box[0]
    return _Result("ok" if res.ok else "failed", None, res.output, res.error)


def _die_with_worker_fn() -> Any:
    """On Linux, a function making a child get SIGKILL when its worker dies (kill -9
    included). It reaches that child only, not the processes it starts: the watchdog
    kills the whole group, but only once it is told of it, and this covers the moment
    before."""
    if os.uname().sysname != "Linux":
        return None
    import ctypes

    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    pr_set_pdeathsig = 1

    def die_with_worker() -> None:
        prctl(pr_set_pdeathsig, signal.SIGKILL)

    return die_with_worker


_DIE_WITH_WORKER = _die_with_worker_fn()


@functools.cache
def _setpriv_prefix() -> tuple[str, ...]:
    """``setpriv --pdeathsig KILL --`` where util-linux has it, else ().

    It does what _DIE_WITH_WORKER does without Python code in the child: a
    preexec_fn forces a full fork of the worker, about 5 ms a start.
    """
    path = shutil.which("setpriv") if os.uname().sysname == "Linux" else None
    if path is None:
        return ()
    prefix = (path, "--pdeathsig", "KILL", "--")
    try:
        works = subprocess.run([*prefix, path, "--version"], stdin=subprocess.DEVNULL,
                               capture_output=True, timeout=10).returncode == 0
    except (OSError, subprocess.SubprocessError):
        works = False
    return prefix if works else ()


def _runnable(program: str, cwd: str | None, env: dict[str, str]) -> bool:
    """Whether ``program`` would be found and may be run, as exec would see it."""
    if "/" in program:
        return os.access(os.path.join(cwd or "", program), os.X_OK)
    return shutil.which(program, path=env.get("PATH", os.defpath)) is not None


def _spawn_args(argv: list[str], cwd: str | None, env: dict[str, str]) -> dict[str, Any]:
    """How to start ``argv`` so that it dies with its worker."""
    prefix = _setpriv_prefix()
    # A program that cannot run is started directly, so its error is its own, not setpriv's.
    if prefix and _runnable(argv[0], cwd, env):
        return {"args": [*prefix, *argv], "preexec_fn": None}
    return {"args": argv, "preexec_fn": _DIE_WITH_WORKER}


def _run_command(
    job: Any, ctx: FireContext, cancel: threading.Event, deadline: float | None,
    guard: Guard | None = None,
) -> _Result:
    argv = ["/bin/sh", "-c", " ".join(job.command)] if job.shell else list(job.command)
    # CRONSVC_* last: a job's own env must not be able to fake its fire identity.
    env = {**os.environ, **job.env, **ctx.env()}
    try:
        proc = subprocess.Popen(
            **_spawn_args(argv, job.cwd, env), stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd=job.cwd, env=env,
            start_new_session=True,
        )
    except OSError as exc:
        return _Result("failed", error=_start_error(argv[0], job.cwd, exc))
    if guard is None:
        return _supervise(proc, cancel, deadline, job.timeout)
    guard.started(proc.pid)
    try:
        return _supervise(proc, cancel, deadline, job.timeout)
    finally:
        # After the reap and the output's end: what is left of the group until then
        # (children that hold the output pipe) stays under the guard.
        guard.ended(proc.pid)


def _supervise(proc: subprocess.Popen[bytes], cancel: threading.Event,
               deadline: float | None, timeout: float | None) -> _Result:
    """Wait for a started command, its cancel or its deadline; kill its group if need be."""
    assert proc.stdout is not None
    tail = _Tail(proc.stdout)
    exited = threading.Event()

    def reap() -> None:
        proc.wait()  # a blocking waitpid: no polling while the job runs
        exited.set()

    threading.Thread(target=reap, name=f"cronsvc-wait-{proc.pid}", daemon=True).start()
    how = _wait(exited, cancel, deadline)
    if how != "done":
        _kill_group(proc.pid, exited)
    output = tail.finish()
    rc = proc.returncode
    if how != "done":
        return _stopped(how, timeout)._replace(exit_code=rc, output=output)
    if rc == 0:
        return _Result("ok", 0, output)
    if rc is not None and rc < 0:
        return _Result("failed", rc, output, f"killed by {_signal_name(-rc)}")
    return _Result("failed", rc, output, f"exit code {rc}")


def _start_error(program: str, cwd: str | None, exc: OSError) -> str:
    # subprocess reports a failed chdir with the directory as the filename.
    if cwd is not None and exc.filename == cwd:
        return f"cannot change to directory {cwd}: {exc.strerror}"
    if isinstance(exc, FileNotFoundError):
        return f"command not found: {program}"
    if isinstance(exc, PermissionError):
        return f"permission denied: {program}"
    return f"cannot start {program}: {exc.strerror or exc}"


def _signal_name(num: int) -> str:
    try:
        return signal.Signals(num).name
    except ValueError:
        return f"signal {num}"


def _signal_group(pgid: int, sig: int) -> bool:
    """Send `sig` to the group; False when no process of it is left."""
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        return False
    return True


def _kill_group(pgid: int, exited: threading.Event) -> None:
    """SIGTERM the group, give it KILL_GRACE to go, then SIGKILL what is left."""
    if not _signal_group(pgid, signal.SIGTERM):
        return
    grace_end = monotonic() + KILL_GRACE
    exited.wait(KILL_GRACE)
    # The leader may be gone while children that ignore SIGTERM live on in its group.
    while monotonic() < grace_end and _group_alive(pgid):
        time.sleep(0.05)
    _signal_group(pgid, signal.SIGKILL)
    exited.wait(KILL_GRACE)  # bounded: a process stuck in the kernel must not hang the worker


def _group_alive(pgid: int) -> bool:
    """Whether a live (not zombie) process is left in the group.

    killpg(pgid, 0) alone also counts zombies, which linger until their new
    parent reaps them and would make every kill wait out the whole grace.
    """
    if not _signal_group(pgid, 0):
        return False
    try:
        entries = os.listdir("/proc")
    except OSError:  # no procfs: trust killpg
        return True
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue  # gone meanwhile
        if int(fields[2]) == pgid and fields[0] != b"Z":
            return True
    return False


class _Tail:
    """Drains a pipe in a thread, keeping only the last OUTPUT_CAP bytes."""

    def __init__(self, pipe: IO[bytes]) -> None:
        self._pipe = pipe
        self._buf = bytearray()
        self._truncated = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._read, name="cronsvc-output", daemon=True)
        self._thread.start()

    def _read(self) -> None:
        fd = self._pipe.fileno()
        try:
            # select with a timeout, so finish() can stop us even if a process that
            # left the group still holds the pipe open.
            while not self._stop.is_set():
                ready, _, _ = select.select([fd], [], [], SLICE)
                if not ready:
                    continue
                chunk = os.read(fd, 65536)
                if not chunk:
                    return
                self._buf += chunk
                if len(self._buf) > OUTPUT_CAP:
                    del self._buf[:-OUTPUT_CAP]
                    self._truncated = True
        except (OSError, ValueError):
            return

    def finish(self) -> str:
        """Stop reading (after EOF, or EOF_GRACE at most) and return the decoded tail."""
        self._thread.join(EOF_GRACE)
        self._stop.set()
        self._thread.join()
        self._pipe.close()
        data = bytes(self._buf)
        if self._truncated:
            # The cut may have split a UTF-8 sequence: drop its continuation bytes.
            cut = 0
            while cut < min(3, len(data)) and data[cut] & 0xC0 == 0x80:
                cut += 1
            data = data[cut:]
        return data.decode("utf-8", errors="replace")
