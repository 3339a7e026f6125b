"""A command's process group: started so that it dies with its worker, supervised until
it exits, its timeout or its cancel, then killed as a whole.

The command runs in a session of its own, so a timeout or a cancel can kill the whole
tree: SIGTERM to the group, then SIGKILL after :data:`KILL_GRACE` seconds. Its stdout and
stderr are merged; its head and tail are kept (:mod:`cronsvc.run.output`). The
run's :class:`~cronsvc.run.outcome.Guard` is told of the command before it starts, learns
the group as soon as it exists and when it has ended (the worker hands it to its watchdog,
see :mod:`cronsvc.run.watchdog`).

A command the watchdog can find from its first instant starts with a plain vfork and exec
(what ``subprocess`` does without a ``preexec_fn``): about 1 ms of CPU. Any other dies with
its worker through pdeathsig, which costs a wrapper (``setpriv``, an exec more: about 2 ms
more of CPU, 4 ms of wall time) or a full fork of the worker (a ``preexec_fn``, ~10 ms).
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
from typing import Any

from cronsvc.clock import monotonic
from cronsvc.run.outcome import Result, Stop
from cronsvc.run.output import Kept

KILL_GRACE = 2.0  # seconds between SIGTERM and SIGKILL of a command's process group
EOF_GRACE = 1.0  # how long output is still read after the command itself has exited


# Every command's stdin, opened once (subprocess.DEVNULL opens and closes one a start).
_DEVNULL = os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
# How long where a program was found on a PATH is trusted before it is looked up again.
FOUND_FOR = 5.0
_found: dict[tuple[str, str], tuple[str | None, float]] = {}


_environ: tuple[dict[bytes, bytes], dict[str, str]] = ({}, {})


def environ() -> dict[str, str]:
    """``os.environ`` as a dict (not to be changed: a command's environment is made from
    it), copied again only once it has changed. A copy through the mapping decodes every
    entry, about 50 µs a command for 35 variables; comparing the bytes it keeps underneath
    with those of the last copy is one loop in C."""
    global _environ
    data = getattr(os.environ, "_data", None)
    if not isinstance(data, dict):  # not CPython's os.environ: copied each time
        return dict(os.environ)
    cached = _environ
    if cached[0] != data:
        cached = _environ = (data.copy(), dict(os.environ))
    return cached[1]


def run_group(argv: list[str], cwd: str | None, env: dict[str, str], stop: Stop) -> Result:
    """Run ``argv`` in a process group of its own until it exits or ``stop`` ends it."""
    watched = stop.guard is not None and stop.guard.starting(env)
    try:
        proc = _start(argv, cwd, env, watched)
    except OSError as exc:
        return Result("failed", error=_start_error(argv[0], cwd, exc))
    if stop.guard is None:
        return _supervise(proc, stop)
    stop.guard.started(proc.pid)
    try:
        return _supervise(proc, stop)
    finally:
        # After the reap and the output's end: what is left of the group until then
        # (children that hold the output pipe) stays under the guard.
        stop.guard.ended(proc.pid)


def _start(argv: list[str], cwd: str | None, env: dict[str, str],
           watched: bool) -> subprocess.Popen[bytes]:
    """Start ``argv``; a program named without a slash from where it was last found on
    its PATH (:func:`_program`), or, when that fails, looked for again as exec does."""
    spawn = _spawn_args(argv, cwd, env, watched)
    name = spawn["args"][0]  # setpriv's own path, or the command's
    program = _program(name, env)
    if program is not None:
        try:
            return _popen(spawn, cwd, env, program)
        except OSError:
            _found.pop((name, env.get("PATH", os.defpath)), None)
    return _popen(spawn, cwd, env, None)


def _popen(spawn: dict[str, Any], cwd: str | None, env: dict[str, str],
           program: str | None) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        **spawn, executable=program, stdin=_DEVNULL, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, cwd=cwd, env=env, start_new_session=True)


def _program(name: str, env: dict[str, str]) -> str | None:
    """The file exec would run for ``name`` on the PATH of ``env``, looked up at most every
    FOUND_FOR seconds; None to leave the search to exec (a name with a slash, a PATH with a
    relative directory, which depends on the command's cwd, or nothing found).

    exec's own search tries every directory of the PATH in turn, an execve each (eight
    failed ones for ``true`` on a PATH of eleven), in the child while the worker waits for
    it, the GIL held; the list of the candidates costs the worker as much again."""
    if "/" in name:
        return None
    path = env.get("PATH", os.defpath)
    key = (name, path)
    now = monotonic()
    hit = _found.get(key)
    if hit is not None and now < hit[1]:
        return hit[0]
    program = None
    if all(os.path.isabs(d) for d in path.split(os.pathsep)):
        program = shutil.which(name, path=path)
    if len(_found) > 1000:  # a bound on what ever changing PATHs leave
        _found.clear()
    _found[key] = (program, now + FOUND_FOR)
    return program


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


#: Makes the calling process get SIGKILL when its parent dies (None: not on this system).
die_with_parent = _die_with_worker_fn()


@functools.cache
def _setpriv_prefix() -> tuple[str, ...]:
    """``setpriv --pdeathsig KILL --`` where util-linux has it, else ().

    It does what die_with_parent does without Python code in the child: a
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


def _spawn_args(argv: list[str], cwd: str | None, env: dict[str, str],
                watched: bool) -> dict[str, Any]:
    """How to start ``argv`` so that it dies with its worker (``watched``: the watchdog
    sees to that)."""
    if watched:
        return {"args": argv, "preexec_fn": None}
    prefix = _setpriv_prefix()
    # A program that cannot run is started directly, so its error is its own, not setpriv's.
    if prefix and _runnable(argv[0], cwd, env):
        return {"args": [*prefix, *argv], "preexec_fn": None}
    return {"args": argv, "preexec_fn": die_with_parent}


def _supervise(proc: subprocess.Popen[bytes], stop: Stop) -> Result:
    """Wait for a started command, its cancel or its deadline; kill its group if need be."""
    watch = _Watch(proc, stop.output or Kept())
    try:
        how = stop.wait(watch)
        if how != "done":
            _kill_group(proc.pid, watch)
        output = watch.finish()
    finally:
        watch.close()
    rc = proc.returncode
    if how != "done":
        return stop.stopped(how)._replace(exit_code=rc, output=output)
    if rc == 0:
        return Result("ok", 0, output)
    if rc is not None and rc < 0:
        return Result("failed", rc, output, f"killed by {_signal_name(-rc)}")
    return Result("failed", rc, output, f"exit code {rc}")


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


class _Watch:
    """A started command's exit and its output, both waited for by the thread that runs it:
    one ``select`` on its pidfd (Linux 5.3; elsewhere on a pipe that a thread of its own
    closes once a blocking waitpid returns) and its output pipe, whose chunks are kept as
    they come. Nothing polls while the command runs, and no thread is started for it
    where there is a pidfd: a start costs no hand-off between threads."""

    def __init__(self, proc: subprocess.Popen[bytes], kept: Kept) -> None:
        assert proc.stdout is not None
        self._proc = proc
        self._kept = kept
        self._out = proc.stdout.fileno()
        self._reading = True  # the output pipe is not at its end yet
        self._reaper = False
        try:
            self._exit = os.pidfd_open(proc.pid)
        except (AttributeError, OSError):  # no pidfd here: a thread reaps it
            self._exit, told = os.pipe()
            self._reaper = True

            def reap() -> None:
                proc.wait()  # a blocking waitpid
                os.close(told)  # the read end sees its end: exited

            threading.Thread(target=reap, name=f"cronsvc-wait-{proc.pid}", daemon=True).start()

    def wait(self, timeout: float | None = None) -> bool:
        """True once the command has exited (and is reaped), within ``timeout``; its output
        is read meanwhile."""
        if self._proc.returncode is not None:
            return True
        until = None if timeout is None else monotonic() + timeout
        while True:
            left = None if until is None else max(until - monotonic(), 0.0)
            ready = self._select([self._exit], left)
            if self._exit in ready:
                if not self._reaper:
                    self._proc.wait()  # exited: reaped at once
                return True
            if not ready or (until is not None and monotonic() >= until):
                return False

    def pause(self, seconds: float) -> None:
        """Read the output for ``seconds`` (sleep, once it has ended)."""
        until = monotonic() + seconds
        while (left := until - monotonic()) > 0:
            if not self._reading:
                time.sleep(left)
                return
            self._select([], left)

    def finish(self) -> str:
        """Read the output up to its end, EOF_GRACE at most: processes the command started
        may hold the pipe open after it has exited. Returns what is kept of it."""
        until = monotonic() + EOF_GRACE
        while self._reading and (left := until - monotonic()) > 0:
            if not self._select([], left):
                break
        return self._kept.text()

    def _select(self, fds: list[int], timeout: float | None) -> list[int]:
        """``select`` on ``fds`` and the output pipe (while it is open); reads the output
        if it is ready. Returns the fds that were ready."""
        watched = [*fds, self._out] if self._reading else fds
        if not watched:
            return []
        ready, _, _ = select.select(watched, [], [], timeout)
        if self._out in ready:
            try:
                chunk = os.read(self._out, 65536)
            except OSError:
                chunk = b""
            if chunk:
                self._kept.add(chunk)
            else:
                self._reading = False
        return ready

    def close(self) -> None:
        if self._exit >= 0:
            os.close(self._exit)
            self._exit = -1
        assert self._proc.stdout is not None
        self._proc.stdout.close()


def _kill_group(pgid: int, exited: _Watch) -> None:
    """SIGTERM the group, give it KILL_GRACE to go, then SIGKILL what is left."""
    if not _signal_group(pgid, signal.SIGTERM):
        return
    grace_end = monotonic() + KILL_GRACE
    exited.wait(KILL_GRACE)
    # The leader may be gone while children that ignore SIGTERM live on in its group.
    while monotonic() < grace_end and _group_alive(pgid):
        exited.pause(0.05)
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
