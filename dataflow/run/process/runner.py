"""The job's process: started, watched (:mod:`.watcher`) and ended; how it ended.

The runner knows nothing of SQL or chunks: it gets an argv, an environment, the
chunk lock's descriptor (handed to the job, so the whole process tree holds the
lock) and a log file. The job runs in its own process group so that a signal to
RunJob, or a timeout, reaches all of it.
"""

from __future__ import annotations

import _signal as signal  # signal's C core: its module's enums import enum
import contextlib
import errno
import os
import sys
import threading
import time
from collections import namedtuple
from collections.abc import Callable

from ...errors import ScriptError
from . import spawn
from .output import Copier, LogSink, Sink, Tail, last_words, start_thread
from .suspend import starting
from .watcher import Watcher

TYPE_CHECKING = False  # typing's flag, without importing typing (a run's start)
if TYPE_CHECKING:
    import subprocess

# never handed to the job: it receives decrypted passwords, not the key to all of them
# (nor the file that holds the key)
WITHHELD = ("PASSKEY", "PASSKEY_FILE")
KILL_GRACE_S = 10.0  # after SIGTERM (a timeout, or a signal passed on), before SIGKILL
_POLL_S = 0.2  # how often a wait looks up (a signal's handler runs between looks)


def child_environment(job_variables: dict[str, str]) -> dict[str, str]:
    """The inherited environment, less the passkey, plus the job's variables."""
    env = {k: v for k, v in os.environ.items() if k not in WITHHELD}
    env.update(job_variables)
    return env


def python_command(module: str) -> list[str]:
    """This Python running ``module`` of this toolkit (a worker, a RunJob of a folder's
    drain): with ``-P``, which keeps the working folder (the user's, its jobs') off the
    module path, where a ``dataflow`` package of its own would run instead; without it
    when that folder holds this very toolkit (a checkout run in place)."""
    root = os.path.realpath(__file__)
    for _ in range(4):  # above dataflow/run/process/runner.py (a checkout at / too)
        root = os.path.dirname(root)
    try:
        in_place = os.path.realpath(os.getcwd()) == root
    except OSError:  # no working folder any more
        in_place = False
    return [sys.executable, *([] if in_place else ["-P"]), "-m", module]


def start_in_own_group(argv: list[str], **options) -> subprocess.Popen:
    """A process of ours (a worker, a folder's RunJob) in a process group of its own: a
    terminal's ^C reaches it only through this process, which passes it on once. It
    starts with SIGTTOU ignored, so that it writes to the terminal as this one does
    (``stty tostop`` stops a writer of a group that is not the terminal's own)."""
    import subprocess

    previous = signal.signal(signal.SIGTTOU, signal.SIG_IGN)
    try:
        return subprocess.Popen(argv, stdin=subprocess.DEVNULL, process_group=0, **options)
    finally:
        signal.signal(signal.SIGTTOU, previous)


def signal_name(number: int) -> str:
    import signal as names  # its enums: only for a job a signal ended

    try:
        return names.Signals(number).name
    except ValueError:
        return f"signal {number}"


class Outcome(
    namedtuple(
        "Outcome",
        "returncode duration timeout interrupted validation lost exception cluster error said",
        defaults=(0.0, None, None, None, (), None, None, None, None),
    )
):
    """How the job's process ended.

    returncode: negative when killed by that signal, as subprocess reports it;
    timeout: set when the job was killed for running too long; interrupted: the
    signal RunJob received and passed on; validation: "passed" or "failed" when a
    check ran after the job; lost: destinations its output could not be written to;
    exception: the last line of a Python traceback the job wrote (a .py job's, or any
    Python's), which names why it failed better than its exit code; cluster: the
    application a Spark job ran on a cluster, and how it ended there; error: why a chunk
    run inside a Spark driver failed (its exception's last line); said: the last lines
    the job wrote to stderr, which say why a job that exited with a code failed.
    """

    __slots__ = ()

    @property
    def ok(self) -> bool:
        passed = self.validation != "failed"
        return self.returncode == 0 and self.timeout is None and self.interrupted is None and passed

    @property
    def exit_code(self) -> int:
        """What RunJob exits with: 128+n when RunJob got signal n, 124 on timeout,
        else the job's own code (128+n when the job died of signal n)."""
        if self.interrupted:
            return 128 + self.interrupted
        if self.timeout is not None:
            return 124
        if self.validation == "failed" and self.returncode == 0:
            return 1
        return 128 - self.returncode if self.returncode < 0 else self.returncode

    @property
    def signal(self) -> str | None:
        if self.interrupted:
            return signal_name(self.interrupted)
        return signal_name(-self.returncode) if self.returncode < 0 else None

    @property
    def reason(self) -> str | None:
        if self.validation == "failed" and self.returncode == 0 and not self.interrupted:
            return "validation failed"
        if self.interrupted:
            return f"interrupted by {signal_name(self.interrupted)}"
        if self.timeout is not None:
            return f"timeout after {self.timeout:g} s"
        if self.returncode < 0:
            return f"killed by {signal_name(-self.returncode)}"
        if self.error:
            return self.error
        if not self.returncode:
            return None
        if self.exception:
            return f"{self.exception} (exit code {self.returncode})"
        if self.said:
            return f"exit code {self.returncode}: {self.said}"
        return f"exit code {self.returncode}"

    @property
    def note(self) -> str | None:
        """The reason, any output that could not be written, and the cluster application:
        for the history."""
        lost = f"output not written to {', '.join(self.lost)}" if self.lost else None
        return "; ".join(part for part in (self.reason, lost, self.cluster) if part) or None


class Run:
    """One job process, started in its own process group, its output tee'd to a log."""

    def __init__(
        self,
        argv: list[str],
        env: dict[str, str],
        *,
        lock_fd: int | None = None,
        log_path: str | os.PathLike | None = None,
        secrets: tuple[str, ...] | list[str] = (),
        echo: bool = True,
        timeout: float | None = None,
        append: bool = False,
        watcher: Watcher | None = None,
        words: bool = True,
    ):
        self.argv, self.env, self.lock_fd = argv, env, lock_fd
        self.watcher = watcher  # None: one of its own (a thread)
        self.log_path, self.secrets, self.echo, self.timeout = log_path, secrets, echo, timeout
        self.append = append
        # a failure's reason ends with what the job said last on stderr (a Spark job's
        # stderr is Spark's and the JVM's: its Python traceback says why instead)
        self.words = words
        self.process: spawn.Child | None = None
        self.interrupted: int | None = None
        self._terminated_at: float | None = None  # when the group was first asked to end
        self._ended_for_time: float | None = None  # its timeout, once it was ended for it
        self._killed = False  # SIGKILL sent
        self._reaping = threading.RLock()  # its reaping, and each signal to its group
        self._outcome: Outcome | None = None
        self._then: Callable[[Outcome], object] | None = None
        self._then_lock = threading.Lock()
        self._done = threading.Event()

    def start(self) -> None:
        self._started = time.monotonic()
        # what copies its output and waits for it first: without it (no thread or
        # descriptor left) the job must not start at all
        watcher = self.watcher or Watcher()
        try:
            watcher.ready()
        except (OSError, RuntimeError) as exc:
            why = f"nothing to read its output ({exc})"
            code = getattr(exc, "errno", None) or errno.EAGAIN
            raise ScriptError(self.argv[0], why, code) from None
        try:
            with starting():  # a ^Z meanwhile is put off until it can be passed on
                self.process = self._spawn(self.argv)
            self._log = log = self._open_log()
            self._tail, self._stderr = Tail(), Tail()
            # spark-submit hands its Python driver's stderr on through its stdout: watch both
            routes = [(self.process.stdout, [log, self._tail, *self._watchers()])]
            routes.append((self.process.stderr, [log, self._tail, self._stderr, *self._watchers()]))
            if self.echo:
                routes[0][1].append(Sink.console("stdout", sys.stdout))
                routes[1][1].append(Sink.console("stderr", sys.stderr))
            self._copier = Copier(routes, self.secrets)
            watcher.watch(self, self._exited)
            if self.echo:  # a console nobody reads (| less left alone, ^S) may stall the
                start_thread(self._keep_time)  # watcher's thread: its clock runs apart
        finally:
            if watcher is not self.watcher:  # its own: it ends with the job
                watcher.close()

    def _watchers(self) -> list[Sink]:
        """More destinations of the job's output (each of stdout and stderr): for a
        subclass that reads what the job says."""
        return []

    def _open_log(self) -> Sink:
        if self.log_path is None:
            return Sink("log", None)
        flags = (
            os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC | (os.O_APPEND if self.append else os.O_TRUNC)
        )
        try:
            try:
                return LogSink(os.open(self.log_path, flags, 0o644))
            except FileNotFoundError:  # the chunk's first log: its folder first
                os.makedirs(os.path.dirname(self.log_path), exist_ok=True)
                return LogSink(os.open(self.log_path, flags, 0o644))
        except OSError as exc:  # checked before the claim; lost since: run without it
            return Sink("log", None, f"log: {exc.strerror or exc}")

    def _spawn(self, argv: list[str]) -> spawn.Child:
        try:
            return spawn.start(argv, self.env, self.lock_fd)
        except OSError as exc:
            if exc.errno == errno.ENOENT and os.path.exists(argv[0]):
                raise ScriptError(argv[0], "its interpreter (first line) is not there") from None
            if exc.errno != errno.ENOEXEC:
                raise ScriptError(argv[0], exc.strerror or str(exc), exc.errno) from None
        # A script without a "#!" line: run it with bash, as bash itself (and the seed) would.
        from shutil import which

        return self._spawn([which("bash") or "/bin/sh", *argv])

    def signal(self, number: int) -> None:
        """Pass a signal RunJob received to the job's whole process group; a job still
        alive KILL_GRACE_S later gets SIGKILL (see :meth:`overdue`)."""
        self.interrupted = self.interrupted or number
        self._terminated_at = self._terminated_at or time.monotonic()
        self._kill_group(number)

    def pass_on(self, number: int) -> None:
        """A signal that stops or continues this process (^Z, then fg): the job's group
        stops and goes on with it."""
        self._kill_group(number)

    def _kill_group(self, number: int) -> None:
        with self._reaping:  # once reaped, its pid (its group's id) may be another job's
            if self.process is not None and self.process.returncode is None:
                with contextlib.suppress(ProcessLookupError, PermissionError):  # already gone
                    os.killpg(self.process.pid, number)

    def wait(self) -> Outcome:
        """Wait for the job (SIGTERM on timeout, SIGKILL when a SIGTERM or a signal passed
        on is ignored for KILL_GRACE_S) and for its output to be copied."""
        while not self._done.wait(_POLL_S):  # a timeout: a signal's handler runs promptly
            pass
        assert self._outcome is not None
        return self._outcome

    def when_ended(self, report: Callable[[Outcome], object]) -> None:
        """Have ``report(outcome)`` called once the job has ended (from the watcher's
        thread; at once if it has): instead of a thread that waits."""
        with self._then_lock:
            if self._outcome is None:
                self._then = report
                return
        report(self._outcome)

    # what the watcher asks of a run
    def pipes(self) -> list[object]:
        return list(self._copier.routes)

    def copy(self, pipe: object) -> bool:
        return self._copier.read(pipe)

    def close_pipes(self) -> None:
        self._copier.close()

    def reap(self) -> int:
        """Its exit code, the exited process reaped: its group is signalled no more."""
        with self._reaping:
            return self.process.wait()

    def overdue(self, now: float) -> float | None:
        """(The watcher's: None for a run that echoes, whose clock runs in a thread of
        its own.)"""
        return None if self.echo else self._clock(now)

    def _keep_time(self) -> None:
        due: float | None = 0.0
        while not self._done.wait(_POLL_S if due is None else min(due, _POLL_S)):
            due = self._clock(time.monotonic())

    def _clock(self, now: float) -> float | None:
        """End a job past its time: SIGTERM at its timeout, SIGKILL KILL_GRACE_S after a
        SIGTERM (or a signal passed on). Seconds until it should be asked again."""
        due = []
        if self.timeout is not None and self._ended_for_time is None:
            if now - self._started > self.timeout:
                self._ended_for_time = self.timeout
                self._terminated_at = self._terminated_at or now
                self._kill_group(signal.SIGTERM)
            else:
                due.append(self._started + self.timeout - now)
        if self._terminated_at is not None and not self._killed:
            if now - self._terminated_at > KILL_GRACE_S:
                self._killed = True
                self._kill_group(signal.SIGKILL)
            else:
                due.append(self._terminated_at + KILL_GRACE_S - now)
        return min(due, default=None)

    def _exited(self, code: int | None) -> None:
        """The job has exited (code None: its end is unknown, the watcher failed), its
        output is copied: its outcome, always given."""
        outcome = Outcome(1, lost=("RunJob: the watcher of its output failed",))
        try:
            if self._log.fd is not None:
                with contextlib.suppress(OSError):
                    os.close(self._log.fd)
            if code is not None:
                duration = round(time.monotonic() - self._started, 3)
                exception = self._tail.exception() if code > 0 else None
                said = last_words(bytes(self._stderr.data)) if code > 0 and self.words else None
                lost = self._copier.lost()
                outcome = Outcome(
                    code,
                    duration,
                    self._ended_for_time,
                    self.interrupted,
                    lost=lost,
                    exception=exception,
                    said=said,
                )
        finally:
            with self._then_lock:
                self._outcome, then = outcome, self._then
            self._done.set()
            if then is not None:
                then(outcome)
