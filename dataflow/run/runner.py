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
import selectors
import signal
import subprocess
import sys
import threading
import time
from collections import namedtuple
from pathlib import Path

from ..errors import ScriptError
from .logs import Redactor

# never handed to the job: it receives decrypted passwords, not the key to all of them
WITHHELD = ("PASSKEY",)
KILL_GRACE_S = 10.0  # after SIGTERM on timeout, before SIGKILL
DRAIN_AFTER_EXIT_S = 1.0  # output a lingering grandchild still writes after the job exits


def job_name(script: str) -> str:
    """The jobid of a script: its file name without folder and extension."""
    name = Path(script).name
    stem, dot, _ = name.rpartition(".")
    return stem if dot and stem else name


def resolve(script: str) -> str:
    """The path to execute for ``script``; a clear error if it cannot run."""
    path = script
    if "/" not in script:
        from shutil import which  # only here: shutil costs ~3 ms of every RunJob's start

        path = f"./{script}" if os.path.exists(script) else which(script) or script
    if not os.path.exists(path):
        raise ScriptError(script, "no such file")
    if os.path.isdir(path):
        raise ScriptError(script, "it is a folder")
    if not os.access(path, os.X_OK):
        raise ScriptError(script, f"it is not executable (chmod +x {script})")
    return path


def child_environment(job_variables: dict[str, str]) -> dict[str, str]:
    """The inherited environment, less the passkey, plus the job's variables."""
    env = {k: v for k, v in os.environ.items() if k not in WITHHELD}
    env.update(job_variables)
    return env


def signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


class Outcome(
    namedtuple(
        "Outcome",
        "returncode duration timeout interrupted validation",
        defaults=(0.0, None, None, None),
    )
):
    """How the job's process ended.

    returncode: negative when killed by that signal, as subprocess reports it;
    timeout: set when the job was killed for running too long; interrupted: the
    signal RunJob received and passed on; validation: "passed" or "failed" when a
    check ran after the job.
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
        return f"exit code {self.returncode}" if self.returncode else None


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
        self._stop_tee = threading.Event()

    def start(self) -> None:
        self._started = time.monotonic()
        if self.log_path is not None:
            self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = open(self.log_path or os.devnull, "ab" if self.append else "wb")  # noqa: SIM115 (closed in wait)
        self.process = self._spawn(self.argv)
        self._tee = threading.Thread(target=self._copy_output, daemon=True)
        self._tee.start()

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
            if exc.errno != errno.ENOEXEC:
                raise ScriptError(argv[0], exc.strerror or str(exc)) from None
        # A script without a "#!" line: run it with bash, as bash itself (and the seed) would.
        from shutil import which

        return self._spawn([which("bash") or "/bin/sh", *argv])

    def signal(self, number: int) -> None:
        """Pass a signal RunJob received to the job's whole process group."""
        self.interrupted = self.interrupted or number
        self._kill_group(number)

    def _kill_group(self, number: int) -> None:
        if self.process is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):  # already gone
                os.killpg(self.process.pid, number)

    def wait(self) -> Outcome:
        """Wait for the job (killing it on timeout) and for its output to be copied."""
        assert self.process is not None
        timed_out = None
        try:
            code = self.process.wait(timeout=self.timeout)
        except subprocess.TimeoutExpired:
            timed_out = self.timeout
            self._kill_group(signal.SIGTERM)
            try:
                code = self.process.wait(timeout=KILL_GRACE_S)
            except subprocess.TimeoutExpired:
                self._kill_group(signal.SIGKILL)
                code = self.process.wait()
        self._tee.join(DRAIN_AFTER_EXIT_S)
        self._stop_tee.set()  # a grandchild keeps the pipe open: stop copying
        self._tee.join()
        self._log.close()
        duration = time.monotonic() - self._started
        return Outcome(code, round(duration, 3), timed_out, self.interrupted)

    def _copy_output(self) -> None:
        assert self.process is not None
        streams = {
            self.process.stdout: (Redactor(self.secrets), sys.stdout.buffer),
            self.process.stderr: (Redactor(self.secrets), sys.stderr.buffer),
        }
        with selectors.DefaultSelector() as selector:
            for pipe in streams:
                selector.register(pipe, selectors.EVENT_READ)
            while selector.get_map() and not self._stop_tee.is_set():
                for key, _ in selector.select(timeout=0.1):
                    redactor, echo_to = streams[key.fileobj]
                    data = os.read(key.fd, 65536)
                    if not data:
                        selector.unregister(key.fileobj)
                        data = redactor.flush()
                    else:
                        data = redactor.feed(data)
                    self._write(data, echo_to)
        for pipe, (redactor, echo_to) in streams.items():
            self._write(redactor.flush(), echo_to)
            pipe.close()

    def _write(self, data: bytes, echo_to) -> None:
        if not data:
            return
        self._log.write(data)
        self._log.flush()
        if self.echo:
            echo_to.write(data)
            echo_to.flush()
