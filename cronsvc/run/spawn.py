"""Starting a command without holding the interpreter's lock while it execs.

On Python 3.11, ``subprocess`` holds the GIL through its vfork until the child has
exec'd: on a busy machine, where the child waits for a CPU, every thread of the worker
waits with it (1-2.5 ms a command at a load average of 4, so the tenth command of a
second started 20 ms late). glibc's ``posix_spawn`` does the same vfork and exec, and
called through ctypes it runs with the GIL released: the worker's other threads go on
while the child starts. (Python 3.12 releases the GIL around its own vfork.)

:func:`spawn` starts a command the way :mod:`cronsvc.run.processes` asks ``subprocess``
to: stdin from /dev/null, stdout and stderr to one pipe, a session of its own, every
other descriptor closed, SIGPIPE and SIGXFSZ back to their default; its program looked
up on the ``PATH`` of the environment it is given. It returns None where it cannot
(not glibc 2.34 or later, or a ``cwd`` to change to: whose failure ``subprocess`` tells
apart); the caller uses ``subprocess`` then.
"""

from __future__ import annotations

import ctypes
import functools
import os
import signal
from typing import IO, Any

POSIX_SPAWN_SETSIGDEF = 0x04
POSIX_SPAWN_SETSID = 0x80
# Opaque glibc structures, given more room than they take (80, 336 and 128 bytes on
# x86-64 and aarch64).
_ACTIONS_SIZE = 256
_ATTR_SIZE = 1024
_SIGSET_SIZE = 256


@functools.cache
def _libc() -> Any:
    """glibc's posix_spawn and the helpers it needs, or None where they are missing."""
    if os.uname().sysname != "Linux":
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        for name in ("posix_spawn", "posix_spawn_file_actions_init",
                     "posix_spawn_file_actions_destroy", "posix_spawn_file_actions_adddup2",
                     "posix_spawn_file_actions_addopen",
                     "posix_spawn_file_actions_addclosefrom_np", "posix_spawnattr_init",
                     "posix_spawnattr_destroy", "posix_spawnattr_setflags",
                     "posix_spawnattr_setsigdefault", "sigemptyset", "sigaddset"):
            getattr(libc, name)
    except (OSError, AttributeError):
        return None
    libc.posix_spawn.argtypes = [ctypes.POINTER(ctypes.c_int), ctypes.c_char_p,
                                 ctypes.c_void_p, ctypes.c_void_p,
                                 ctypes.POINTER(ctypes.c_char_p),
                                 ctypes.POINTER(ctypes.c_char_p)]
    libc.posix_spawn_file_actions_addopen.argtypes = [
        ctypes.c_void_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_uint]
    return libc


class Child:
    """A started command, as much of :class:`subprocess.Popen` as its supervisor uses."""

    def __init__(self, pid: int, stdout: IO[bytes]) -> None:
        self.pid = pid
        self.stdout = stdout
        self.returncode: int | None = None

    def wait(self) -> int:
        if self.returncode is None:
            try:
                _, status = os.waitpid(self.pid, 0)
            except ChildProcessError:  # reaped already (by a wait racing this one)
                status = 0
            self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode


def spawn(argv: list[str], env: dict[str, str], cwd: str | None) -> Child | None:
    """Start ``argv`` (see the module's doc); None where this cannot, OSError as
    ``subprocess`` raises it when the program cannot be run."""
    libc = _libc()
    if libc is None or cwd is not None:
        return None
    program = _program(argv[0], env)
    read, write = os.pipe()  # both close-on-exec: the child gets copies on 1 and 2
    if min(read, write) < 3:  # the worker runs without its own 0, 1 or 2: subprocess copes
        os.close(read)
        os.close(write)
        return None
    actions = ctypes.create_string_buffer(_ACTIONS_SIZE)
    attr = ctypes.create_string_buffer(_ATTR_SIZE)
    defaults = ctypes.create_string_buffer(_SIGSET_SIZE)
    libc.posix_spawn_file_actions_init(actions)
    libc.posix_spawnattr_init(attr)
    try:
        for ok in (
            libc.posix_spawn_file_actions_addopen(actions, 0, b"/dev/null", os.O_RDONLY, 0),
            libc.posix_spawn_file_actions_adddup2(actions, write, 1),
            libc.posix_spawn_file_actions_adddup2(actions, write, 2),
            libc.posix_spawn_file_actions_addclosefrom_np(actions, 3),
            libc.sigemptyset(defaults),
            libc.sigaddset(defaults, signal.SIGPIPE),
            libc.sigaddset(defaults, signal.SIGXFSZ),
            libc.posix_spawnattr_setsigdefault(attr, defaults),
            libc.posix_spawnattr_setflags(attr, POSIX_SPAWN_SETSID | POSIX_SPAWN_SETSIGDEF),
        ):
            if ok != 0:
                raise OSError(ok if ok > 0 else ctypes.get_errno(), "posix_spawn setup")
        args = [os.fsencode(word) for word in argv]
        words = (ctypes.c_char_p * (len(args) + 1))(*args, None)
        pairs = [os.fsencode(k) + b"=" + os.fsencode(v) for k, v in env.items()]
        environ = (ctypes.c_char_p * (len(pairs) + 1))(*pairs, None)
        pid = ctypes.c_int(0)
        # ctypes lets go of the GIL for the call: vfork, the child's exec, return.
        err = libc.posix_spawn(ctypes.byref(pid), program, actions, attr, words, environ)
    except BaseException:
        os.close(read)
        raise
    finally:
        os.close(write)
        libc.posix_spawn_file_actions_destroy(actions)
        libc.posix_spawnattr_destroy(attr)
    if err != 0:
        os.close(read)
        raise OSError(err, os.strerror(err), argv[0])
    return Child(pid.value, os.fdopen(read, "rb", buffering=0))


def _program(word: str, env: dict[str, str]) -> bytes:
    """The file exec is given for ``word``: itself if it names a path, else the first
    executable file of that name on the ``PATH`` of ``env`` (if none, one whose exec fails
    as ``subprocess``'s would)."""
    if "/" in word:
        return os.fsencode(word)
    paths = [os.path.join(folder, word) for folder in os.get_exec_path(env)] or [word]
    for path in paths:
        if os.access(path, os.X_OK) and not os.path.isdir(path):
            return os.fsencode(path)
    # None to run: the first that exists (exec says why it cannot), else not found.
    return os.fsencode(next((path for path in paths if os.path.isfile(path)), paths[0]))
