"""A job's process, started with ``os.posix_spawn``: what :class:`subprocess.Popen`
would do for a run (a process group of its own, stdin from ``/dev/null``, stdout and
stderr through pipes, only the chunk lock's descriptor handed on, SIGPIPE and SIGXFSZ as
the job expects them), without importing :mod:`subprocess`, whose import (``locale``,
``re``) was a tenth of a cron tick's RunJob (finding 41).

A command without a ``/`` is looked up in the ``PATH`` of the job's environment, as
subprocess does. The boundary: glibc's ``posix_spawn`` leaves its two internal signals
(32 and 33) ignored in the job, which no job of a glibc program can use anyway.
"""

from __future__ import annotations

import _signal as signal  # signal's C core: its module's enums import enum
import contextlib
import errno
import fcntl
import os

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
        """Its exit code, the process reaped (once). 0 when it was reaped by the kernel (a
        SIGCHLD ignored: RunJob sets it back to its default), as subprocess says then."""
        if self.returncode is None:
            try:
                _, status = os.waitpid(self.pid, 0)
            except ChildProcessError:
                self.returncode = 0
            else:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode


def _pipe(made: list[int]) -> tuple[int, int]:
    """A pipe, both ends in ``made`` as soon as they are open."""
    ends = os.pipe()
    made.extend(ends)
    return _above_std(ends[0], made), _above_std(ends[1], made)


def _above_std(fd: int, made: list[int]) -> int:
    """``fd``, or a copy of it above stdin, stdout and stderr (this process may have
    started with one of them closed: a pipe may then have got its number)."""
    if fd > 2:
        return fd
    made.append(moved := fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 3))
    made.remove(fd)
    os.close(fd)
    return moved


def _withhold() -> None:
    """Mark close-on-exec every descriptor above stderr this process would hand on (those
    inheritable, which it was given by its own parent): a job gets none of them, as
    subprocess closed them. Raises OSError when they cannot be listed (then the job does
    not start: never one that may hold another's descriptor)."""
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        if fd > 2:
            with contextlib.suppress(OSError):  # (the listing's own descriptor, closed)
                if os.get_inheritable(fd):
                    os.set_inheritable(fd, False)


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
    """``argv`` in a process group of its own, with ``env`` and ``lock_fd`` (if any) handed
    on. Raises OSError as exec would (ENOENT, ENOEXEC, EACCES...)."""
    made: list[int] = []  # every descriptor made here: closed here, but the two it returns
    try:
        _withhold()
        out_r, out_w = _pipe(made)
        err_r, err_w = _pipe(made)
        actions = [
            (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
            (os.POSIX_SPAWN_DUP2, out_w, 1),
            (os.POSIX_SPAWN_DUP2, err_w, 2),
        ]
        if lock_fd is not None:  # onto another number: a dup2 clears its close-on-exec
            made.append(copy := os.dup(lock_fd))  # (onto its own, only from glibc 2.29 on)
            actions.append((os.POSIX_SPAWN_DUP2, lock_fd, copy))
        child = Child(_spawn(argv, env, actions), out_r, err_r)
    except BaseException:
        for fd in made:
            os.close(fd)
        raise
    for fd in made:
        if fd not in (out_r, err_r):
            os.close(fd)
    return child
