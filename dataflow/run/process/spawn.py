"""A job's process, started with ``os.posix_spawn``: what :class:`subprocess.Popen`
would do for a run (a process group of its own, stdin from ``/dev/null``, stdout and
stderr through pipes, only the chunk lock's descriptor handed on, SIGPIPE and SIGXFSZ as
the job expects them), without importing :mod:`subprocess`, whose import (``locale``,
``re``) was a tenth of a cron tick's RunJob (finding 41).

A command without a ``/`` is looked up in the ``PATH`` of the job's environment, as
subprocess does.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import signal

_RESET = (signal.SIGPIPE, signal.SIGXFSZ)  # ignored by Python: the job gets their defaults


class Child:
    """A started job process: its pid, its stdout and stderr (pipes), its exit code once
    reaped (negative: killed by that signal)."""

    def __init__(self, pid: int, stdout: int, stderr: int):
        self.pid = pid
        self.stdout = open(stdout, "rb", buffering=0)  # noqa: SIM115 (the watcher closes them)
        self.stderr = open(stderr, "rb", buffering=0)  # noqa: SIM115
        self.returncode: int | None = None

    def wait(self) -> int:
        """Its exit code, the process reaped (once)."""
        if self.returncode is None:
            _, status = os.waitpid(self.pid, 0)
            self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode


def _above_std(fd: int) -> int:
    """``fd``, or a copy of it above stdin, stdout and stderr (this process may have
    started with one of them closed; a pipe may then have got its number)."""
    if fd > 2:
        return fd
    try:
        return fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 3)
    finally:
        os.close(fd)


def _inherited(keep: int | None) -> list[int]:
    """Descriptors above stderr this process would hand on (inheritable ones, which it was
    given by its own parent), but ``keep``: closed in the job, as subprocess closes them."""
    try:
        names = os.listdir("/proc/self/fd")
    except OSError:
        return []
    found = []
    for name in names:
        fd = int(name)
        if fd > 2 and fd != keep:
            with contextlib.suppress(OSError):  # (the listing's own descriptor, closed)
                if os.get_inheritable(fd):
                    found.append(fd)
    return found


def _spawn(argv: list[str], env: dict[str, str], actions: list[tuple]) -> int:
    """The pid; a command without a ``/`` looked up along the job's ``PATH``, as exec
    does: the first error other than "not there", else the last."""
    if "/" in argv[0]:
        commands = [argv[0]]
    else:
        commands = [os.path.join(folder, argv[0]) for folder in os.get_exec_path(env)]
    error: OSError = FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), argv[0])
    for command in commands:
        try:
            return os.posix_spawn(
                command, argv, env, file_actions=actions, setpgroup=0, setsigdef=_RESET
            )
        except OSError as exc:
            if error.errno in (errno.ENOENT, errno.ENOTDIR):
                error = exc
    raise error


def start(argv: list[str], env: dict[str, str], lock_fd: int | None = None) -> Child:
    """``argv`` in a process group of its own, with ``env``, ``lock_fd`` (if any) handed on
    under its own number. Raises OSError as exec would (ENOENT, ENOEXEC, EACCES...)."""
    out_r, out_w = (_above_std(fd) for fd in os.pipe())
    err_r, err_w = (_above_std(fd) for fd in os.pipe())
    actions = [
        (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
        (os.POSIX_SPAWN_DUP2, out_w, 1),
        (os.POSIX_SPAWN_DUP2, err_w, 2),
        *((os.POSIX_SPAWN_CLOSE, fd) for fd in _inherited(lock_fd)),
    ]
    if lock_fd is not None:  # (a descriptor duplicated onto itself loses its close-on-exec)
        actions.append((os.POSIX_SPAWN_DUP2, lock_fd, lock_fd))
    try:
        pid = _spawn(argv, env, actions)
    except BaseException:
        for fd in (out_r, err_r):
            os.close(fd)
        raise
    finally:
        os.close(out_w)
        os.close(err_w)
    return Child(pid, out_r, err_r)
