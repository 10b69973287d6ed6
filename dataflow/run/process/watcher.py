"""Watching job processes from one thread: their output copied to its sinks, their
exits noticed (a pidfd each), the ones that outrun their timeout or ignore a signal
ended, and each end reported.

A drain watches all its jobs with one :class:`Watcher`, instead of two threads a job
(one to copy its output, one to wait for it): thread starts and the wake-ups between
threads were a third of what a short job cost the drain. The thread (and the pipe that
wakes it) is made before the first job starts, so that a job never runs with nobody to
read its output; once it is there, a job needs no thread or descriptor of its own (a
job whose pidfd cannot be opened is looked at every :data:`TICK_S` instead).
"""

from __future__ import annotations

import contextlib
import errno
import math
import os
import select
import sys
import threading
import time
from collections.abc import Callable

TYPE_CHECKING = False  # typing's flag, without importing typing (a run's start)
if TYPE_CHECKING:
    from typing import Any

TICK_S = 0.2  # how often the clock (timeouts, a signal's grace) and pidfd-less jobs are looked at
DRAIN_AFTER_EXIT_S = 1.0  # output a lingering grandchild still writes after the job exits


class _Poll:
    """What the watcher asks of a selector, on ``select.poll`` (no descriptor of its own to
    make; :mod:`selectors`' import is a fiftieth of a cron tick's RunJob): the files ready
    to read (or at their end), each as (file, data) as it was registered."""

    def __init__(self):
        self._poll = select.poll()
        self._fds: dict[object, int] = {}
        self._keys: dict[int, tuple[Any, Any]] = {}

    def register(self, file: Any, data: Any) -> None:
        fd = file if isinstance(file, int) else file.fileno()
        self._poll.register(fd, select.POLLIN)
        self._fds[file], self._keys[fd] = fd, (file, data)

    def unregister(self, file: Any) -> None:
        fd = self._fds.pop(file)
        self._poll.unregister(fd)
        del self._keys[fd]

    def select(self, timeout: float) -> list[tuple[Any, Any]]:
        ready = self._poll.poll(math.ceil(timeout * 1000))
        return [self._keys[fd] for fd, _ in ready if fd in self._keys]


class _Watched:
    """A job being watched: its pipes still open, its pidfd."""

    def __init__(self, run: Any, report: Callable[[int | None], None]):
        self.run, self.report = run, report
        self.open = set(run.pipes())
        self.pidfd: int | None = None


class Watcher:
    """Copies the output of the runs it is given and reports each one's exit code once
    it has exited and its output is copied (or :data:`DRAIN_AFTER_EXIT_S` later).

    A run has ``pipes()`` (its job's stdout and stderr), ``copy(pipe)`` (one read of
    a pipe; False at its end), ``close_pipes()``, ``process`` (its pid), ``reap()``
    (its exit code, the process reaped) and ``overdue(now)`` (it ends a job past its
    time; seconds until it should be asked again, or None).

    A job that has exited is reaped only as it is reported: until then its pid is still
    its own, never a new job's, and a signal to its group reaches nobody else."""

    def __init__(self):
        self._lock = threading.Lock()
        self._added: list[_Watched] = []
        self._watched: set[_Watched] = set()
        self._exits: dict[_Watched, float] = {}  # exited (when), output not all read
        self._polled: set[_Watched] = set()  # those without a pidfd: looked at each tick
        self._wake: tuple[int, int] | None = None
        self._closing = False

    def ready(self) -> None:
        """Make the thread (and its wake-up pipe) if it is not there: before a job starts.
        OSError (no descriptor left) or RuntimeError (no thread left) if they cannot be."""
        with self._lock:
            if self._wake is not None:
                return
            wake = _wake_up()
            try:
                threading.Thread(target=self._serve, args=(wake[0],), daemon=True).start()
            except BaseException:
                _close(wake)
                raise
            self._wake, self._closing = wake, False

    def watch(self, run: Any, report: Callable[[int | None], None]) -> None:
        """Watch ``run`` (started, after :meth:`ready`): ``report(code)`` is called from the
        watcher's thread once (code None: the watcher failed, the job's end is unknown)."""
        with self._lock:
            gone = self._wake is None  # its thread failed: the drain must still hear of it
            if not gone:
                self._added.append(_Watched(run, report))
        if gone:
            report(None)
        self._poke()

    def close(self) -> None:
        """The thread ends once every run it watches has ended (nothing waits for it)."""
        with self._lock:
            self._closing = True
        self._poke()

    def _poke(self) -> None:
        with self._lock:
            if self._wake is not None:
                with contextlib.suppress(BlockingIOError):  # a wake-up is pending already
                    os.write(self._wake[1], (1).to_bytes(8, sys.byteorder))

    def _serve(self, wake: int) -> None:
        selector = _Poll()
        selector.register(wake, None)
        try:
            while self._take(selector):
                timeout = self._timeout(time.monotonic())
                for file, data in selector.select(timeout):
                    if data is None:
                        with contextlib.suppress(BlockingIOError):
                            os.read(wake, 4096)  # (an eventfd's count, or a pipe's bytes)
                    elif data[1] is None:  # a pidfd: the job exited
                        self._exited(selector, data[0], time.monotonic())
                    elif not data[0].run.copy(file):
                        selector.unregister(file)
                        data[0].open.discard(file)
                self._settle(selector, time.monotonic())
        finally:  # closed, or a defect: the drain must still hear of every run
            with self._lock:
                left, self._added = [*self._watched, *self._added], []
                if self._wake is not None:
                    _close(self._wake)
                    self._wake = None
            for watched in left:
                self._end(watched, None)

    def _take(self, selector: _Poll) -> bool:
        """Register the runs added since; False once closed with nothing left to watch."""
        with self._lock:
            added, self._added = self._added, []
            if not added and not self._watched and self._closing:
                assert self._wake is not None
                _close(self._wake)
                self._wake = None
                return False
        for watched in added:
            self._watched.add(watched)
            for pipe in watched.open:
                selector.register(pipe, (watched, pipe))
            try:  # (no pidfd on this system, no descriptor left: looked at each tick)
                watched.pidfd = os.pidfd_open(watched.run.process.pid)
                selector.register(watched.pidfd, (watched, None))
            except AttributeError:
                self._polled.add(watched)
            except OSError as exc:
                if exc.errno not in (errno.EMFILE, errno.ENFILE, errno.ESRCH, errno.ENOSYS):
                    raise
                self._polled.add(watched)
        return True

    def _timeout(self, now: float) -> float:
        """Seconds until something must be looked at: a run's clock, a lingering pipe."""
        timeout = TICK_S
        for watched in self._watched:
            if watched in self._exits:
                timeout = min(timeout, self._exits[watched] + DRAIN_AFTER_EXIT_S - now)
            elif (due := watched.run.overdue(now)) is not None:
                timeout = min(timeout, due)
        return max(timeout, 0.0)

    def _exited(self, selector: _Poll, watched: _Watched, now: float) -> None:
        if not _has_exited(watched):  # a pidfd says so only once the process has exited
            return
        self._exits[watched] = now
        assert watched.pidfd is not None
        selector.unregister(watched.pidfd)
        os.close(watched.pidfd)
        watched.pidfd = None

    def _settle(self, selector: _Poll, now: float) -> None:
        """Report the runs that have exited and whose output is copied (or waited for long
        enough: a grandchild may hold a pipe); look at the jobs without a pidfd."""
        for watched in list(self._polled):
            if _has_exited(watched):
                self._polled.discard(watched)
                self._exits[watched] = now
        for watched, exited_at in list(self._exits.items()):
            if watched.open and now < exited_at + DRAIN_AFTER_EXIT_S:
                continue
            for pipe in watched.open:
                selector.unregister(pipe)
            del self._exits[watched]
            self._end(watched, watched.run.reap())

    def _end(self, watched: _Watched, code: int | None) -> None:
        self._watched.discard(watched)
        if watched.pidfd is not None:
            with contextlib.suppress(OSError):
                os.close(watched.pidfd)
        try:
            watched.run.close_pipes()
        finally:
            watched.report(code)


def _has_exited(watched: _Watched) -> bool:
    """Whether its job has exited, the process left unreaped (its pid still its own)."""
    how = os.WEXITED | os.WNOHANG | os.WNOWAIT
    try:
        if watched.pidfd is not None:
            return os.waitid(os.P_PIDFD, watched.pidfd, how) is not None
        return os.waitid(os.P_PID, watched.run.process.pid, how) is not None
    except ChildProcessError:  # reaped already
        return True


def _wake_up() -> tuple[int, int]:
    """What wakes the watcher's thread: an eventfd (one descriptor: a drain short of
    them still runs a job at a time), else a pipe. Read end, write end."""
    try:
        fd = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
        return fd, fd
    except AttributeError:  # not Linux
        read, write = os.pipe()
        os.set_blocking(read, False)
        os.set_blocking(write, False)
        return read, write


def _close(wake: tuple[int, int]) -> None:
    for fd in set(wake):
        os.close(fd)
