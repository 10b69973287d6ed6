"""The job's process: what to execute for a script, and running it to its end.

The runner knows nothing of SQL or chunks: it gets an argv, an environment, the
chunk lock's descriptor (handed to the job, so the whole process tree holds the
lock) and a log file. The job runs in its own process group so that a signal to
RunJob, or a timeout, reaches all of it.
"""

from __future__ import annotations

import contextlib
import errno
import os
import resource
import select
import signal
import subprocess
import sys
import threading
import time
from collections import namedtuple
from pathlib import Path

from ..errors import ScriptError
from .output import Copier, LogSink, Sink, Tail, start_thread

# never handed to the job: it receives decrypted passwords, not the key to all of them
# (nor the file that holds the key)
WITHHELD = ("PASSKEY", "PASSKEY_FILE")
KILL_GRACE_S = 10.0  # after SIGTERM (a timeout, or a signal passed on), before SIGKILL
_POLL_S = 0.2  # how often a wait looks at the clock
DRAIN_AFTER_EXIT_S = 1.0  # output a lingering grandchild still writes after the job exits
# descriptors RunJob holds for a running job (its pipes, log and lock, the locks of chunks
# claimed ahead for its slot), with room to spare; and for all else
FILES_A_SLOT, FILES_SPARE = 12, 64


def make_room(slots: int) -> None:
    """Raise this process's soft limit of open files, within its hard limit, to what
    ``slots`` jobs at once need (``RunJob --parallel 500`` with a soft limit of 1,024).
    A job that cannot start for want of them all the same makes a drain go on with the
    jobs it runs."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = FILES_SPARE + slots * FILES_A_SLOT
    if soft != resource.RLIM_INFINITY and soft < wanted:
        top = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, top), hard))


def job_name(script: str) -> str:
    """The jobid of a script: its file name without folder and extension."""
    name = Path(script).name
    stem, dot, _ = name.rpartition(".")
    return stem if dot and stem else name


def resolve(script: str, submitted: bool = True) -> str:
    """The path to execute for ``script``; a clear error if it cannot run. ``submitted``:
    a ``.py`` script goes to spark-submit (a job); else it is executed (a ``--validate``)."""
    path = script
    if "/" not in script:
        from shutil import which  # only here: shutil costs ~3 ms of every RunJob's start

        path = f"./{script}" if os.path.exists(script) else which(script) or script
    if not os.path.exists(path):
        raise ScriptError(script, "no such file")
    if os.path.isdir(path):
        raise ScriptError(
            script, "it is a folder (RunJob --all FOLDER runs every job script in it)"
        )
    if submitted and path.endswith(".py"):  # spark-submit reads it: need not be executable
        _check_python(script, path)
        return path
    if not os.access(path, os.X_OK):
        raise ScriptError(script, f"it is not executable (chmod +x {script})")
    _check_interpreter(script, path)
    return path


def _check_python(script: str, path: str) -> None:
    """A ``.py`` job that cannot be read or compiled would fail only inside spark-submit,
    after the claim and seconds of JVM start-up: say so now, nothing claimed."""
    try:
        with open(path, "rb") as file:
            source = file.read()
    except OSError as exc:
        raise ScriptError(script, f"it cannot be read: {exc.strerror or exc}") from None
    try:
        compile(source, path, "exec", dont_inherit=True)
    except SyntaxError as exc:
        where = f" (line {exc.lineno})" if exc.lineno else ""
        raise ScriptError(script, f"it is not valid Python: {exc.msg}{where}") from None
    except ValueError as exc:  # a NUL byte in the source
        raise ScriptError(script, f"it is not valid Python: {exc}") from None


def _check_interpreter(script: str, path: str) -> None:
    """A "#!" line naming a program that is not there fails only at exec time, after the
    claim, with the script's own name in the error: say which file is missing, now. A
    file with no "#!" line runs as a program (ELF) or, if it is text, as a shell script
    (the seed's ``loadbob.sh``); anything else (random bytes, an image) would be fed to
    the shell and burn an attempt on garbage: refused now, nothing claimed."""
    try:
        with open(path, "rb") as file:
            head = file.read(4096)
    except OSError as exc:
        raise ScriptError(script, exc.strerror or str(exc)) from None
    first = head.split(b"\n", 1)[0][:256]
    if not first.startswith(b"#!"):
        if not head.startswith(b"\x7fELF") and not _is_text(head):
            raise ScriptError(
                script,
                "it is neither a program (ELF), a script with a '#!' line nor a text shell script",
            )
        return
    words = first[2:].split()
    interpreter = os.fsdecode(words[0]) if words else ""
    if interpreter.startswith("/") and not os.access(interpreter, os.X_OK):
        raise ScriptError(script, f"its interpreter {interpreter} (first line) is not there")


def _is_text(head: bytes) -> bool:
    """Does a file that begins with ``head`` read as text (UTF-8, no NUL byte)?"""
    import codecs

    try:
        codecs.getincrementaldecoder("utf-8")().decode(head, final=False)  # a cut character
    except UnicodeDecodeError:
        return False
    return b"\0" not in head


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
    root = Path(__file__).resolve().parents[2]
    try:
        in_place = Path.cwd().resolve() == root
    except OSError:  # no working folder any more
        in_place = False
    return [sys.executable, *([] if in_place else ["-P"]), "-m", module]


def signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


class Outcome(
    namedtuple(
        "Outcome",
        "returncode duration timeout interrupted validation lost exception cluster error",
        defaults=(0.0, None, None, None, (), None, None, None),
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
    run inside a Spark driver failed (its exception's last line).
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
        return f"exit code {self.returncode}"

    @property
    def note(self) -> str | None:
        """The reason, any output that could not be written, and the cluster application:
        for the history."""
        lost = f"output not written to {', '.join(self.lost)}" if self.lost else None
        return "; ".join(part for part in (self.reason, lost, self.cluster) if part) or None


def _wait_exit(process: subprocess.Popen, timeout: float) -> int | None:
    """The process's exit code once it ends within ``timeout`` seconds, else None. Woken
    by the exit itself (a pidfd), not by polling: a short job is not kept waiting for
    the next look (``Popen.wait`` with a timeout sleeps up to 50 ms between looks)."""
    if process.returncode is not None:
        return process.returncode
    try:
        pidfd = os.pidfd_open(process.pid)
    except (AttributeError, OSError):  # no pidfd here, or the process is already reaped
        try:
            return process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return None
    try:
        poller = select.poll()
        poller.register(pidfd, select.POLLIN)
        if not poller.poll(timeout * 1000):
            return None
    finally:
        os.close(pidfd)
    return process.wait()


class Run:
    """One job process, started in its own process group, its output tee'd to a log."""

    def __init__(
        self,
        argv: list[str],
        env: dict[str, str],
        *,
        lock_fd: int | None = None,
        log_path: Path | None = None,
        secrets: tuple[str, ...] | list[str] = (),
        echo: bool = True,
        timeout: float | None = None,
        append: bool = False,
    ):
        self.argv, self.env, self.lock_fd = argv, env, lock_fd
        self.log_path, self.secrets, self.echo, self.timeout = log_path, secrets, echo, timeout
        self.append = append
        self.process: subprocess.Popen | None = None
        self.interrupted: int | None = None
        self._terminated_at: float | None = None  # when the group was first asked to end

    def start(self) -> None:
        self._started = time.monotonic()
        # the thread that copies its output first: without one (a limit of tasks) the job
        # must not start at all
        copier: list[Copier] = []
        given = threading.Event()
        try:
            start_thread(lambda: given.wait() and copier and copier[0].run())
        except RuntimeError as exc:
            why = f"no thread for its output ({exc})"
            raise ScriptError(self.argv[0], why, errno.EAGAIN) from None
        try:
            self.process = self._spawn(self.argv)
            self._log = log = self._open_log()
            self._tail = Tail()
            # spark-submit hands its Python driver's stderr on through its stdout: watch both
            routes = [(self.process.stdout, [log, self._tail, *self._watchers()])]
            routes.append((self.process.stderr, [log, self._tail, *self._watchers()]))
            if self.echo:
                routes[0][1].append(Sink.console("stdout", sys.stdout))
                routes[1][1].append(Sink.console("stderr", sys.stderr))
            self._copier = Copier(routes, self.secrets)
            copier.append(self._copier)
        finally:
            given.set()

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
                self.log_path.parent.mkdir(parents=True, exist_ok=True)
                return LogSink(os.open(self.log_path, flags, 0o644))
        except OSError as exc:  # checked before the claim; lost since: run without it
            return Sink("log", None, f"log: {exc.strerror or exc}")

    def _spawn(self, argv: list[str]) -> subprocess.Popen:
        try:
            return subprocess.Popen(
                argv,
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                pass_fds=() if self.lock_fd is None else (self.lock_fd,),
                process_group=0,
            )
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
        alive KILL_GRACE_S later gets SIGKILL (see :meth:`wait`)."""
        self.interrupted = self.interrupted or number
        self._terminated_at = self._terminated_at or time.monotonic()
        self._kill_group(number)

    def _kill_group(self, number: int) -> None:
        if self.process is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):  # already gone
                os.killpg(self.process.pid, number)

    def wait(self) -> Outcome:
        """Wait for the job (SIGTERM on timeout, SIGKILL when a SIGTERM or a signal passed
        on is ignored for KILL_GRACE_S) and for its output to be copied."""
        assert self.process is not None
        timed_out, killed = None, False
        while True:
            code = _wait_exit(self.process, _POLL_S)
            if code is not None:
                break
            now = time.monotonic()
            if (
                self.timeout is not None
                and timed_out is None
                and now - self._started > self.timeout
            ):
                timed_out = self.timeout
                self._terminated_at = self._terminated_at or now
                self._kill_group(signal.SIGTERM)
            elif self._terminated_at and not killed and now - self._terminated_at > KILL_GRACE_S:
                killed = True
                self._kill_group(signal.SIGKILL)
        self._copier.stop(DRAIN_AFTER_EXIT_S)
        if self._log.fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._log.fd)
        duration = round(time.monotonic() - self._started, 3)
        exception = self._tail.exception() if code > 0 else None
        lost = self._copier.lost()
        return Outcome(code, duration, timed_out, self.interrupted, lost=lost, exception=exception)
