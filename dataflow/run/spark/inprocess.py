"""A chunk run inside this process (a Spark driver that drains many chunks): the
job's function in a thread of its own, its Python output and its exception in the
chunk's own log, its end an :class:`~..process.runner.Outcome` like a job process's.

What a thread cannot be is killed: a timeout or a signal calls ``cancel`` (which stops
the chunk's Spark jobs), then the run is given up after ``GIVE_UP_S``. The chunk's
lock stays held, through a duplicate of its descriptor, until the thread really ends:
nobody may take the chunk again while its code may still write.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
import traceback
from collections.abc import Callable, Mapping

from ..process.logs import Redactor
from ..process.output import LogSink, Sink
from ..process.runner import Outcome

GIVE_UP_S = 3.0  # after a cancel, before the run is recorded without its thread
_POLL_S = 0.2
_MAX_REASON = 300
_route = threading.local()  # .writer: the chunk writer of the running thread, if any
_installed = threading.Lock()


class _ChunkWriter:
    """Text written by one chunk's thread: secrets masked, to the chunk's log."""

    def __init__(self, sink: Sink, secrets: list[str] | tuple[str, ...]):
        self.sink, self.redactor = sink, Redactor(secrets)

    def write(self, text: str) -> None:
        self.sink.write(self.redactor.feed(text.encode("utf-8", "backslashreplace")))

    def close(self) -> None:
        self.sink.write(self.redactor.flush())


class _Router:
    """``sys.stdout`` / ``sys.stderr`` of a driver: what a chunk's thread writes goes to
    that chunk's log, everything else to the stream it replaced."""

    def __init__(self, stream):
        self._stream = stream

    def write(self, text: str) -> int:
        writer = getattr(_route, "writer", None)
        if writer is None:
            return self._stream.write(text)
        writer.write(text)
        return len(text)

    def flush(self) -> None:
        if getattr(_route, "writer", None) is None:
            self._stream.flush()

    def isatty(self) -> bool:
        return getattr(_route, "writer", None) is None and self._stream.isatty()

    def __getattr__(self, name: str):
        return getattr(self._stream, name)


def route_output() -> None:
    """Make this process's ``sys.stdout`` and ``sys.stderr`` route per chunk (once)."""
    with _installed:
        if not isinstance(sys.stdout, _Router):
            sys.stdout = _Router(sys.stdout)
        if not isinstance(sys.stderr, _Router):
            sys.stderr = _Router(sys.stderr)


def reason_of(exc: BaseException) -> str:
    """An exception's last traceback line (``ValueError: no such shard``), one line."""
    text = traceback.format_exception_only(type(exc), exc)[-1].strip()
    line = next((part for part in text.splitlines() if part.strip()), type(exc).__name__)
    return line if len(line) <= _MAX_REASON else line[: _MAX_REASON - 3] + "..."


def _job_traceback(exc: BaseException) -> str:
    """The traceback from the job's own code on: the toolkit's frames that called it left out."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None and _ours(tb.tb_frame.f_code.co_filename):
        tb = tb.tb_next
    return "".join(traceback.format_exception(type(exc), exc, tb))


def _ours(filename: str) -> bool:
    return os.path.abspath(filename).startswith(_PACKAGE)


_PACKAGE = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))) + os.sep


def open_log(path: str | os.PathLike | None) -> Sink:
    """A chunk's log, new (a sink that writes nowhere, saying why, if it cannot be opened)."""
    if path is None:
        return Sink("log", None)
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        return LogSink(os.open(path, flags, 0o644))
    except OSError as exc:  # checked before the claim; lost since: run without it
        return Sink("log", None, f"log: {exc.strerror or exc}")


class ThreadRun:
    """``work(variables)`` for one chunk in a thread; the same life as a job process:
    :meth:`start`, :meth:`signal`, :meth:`wait` -> Outcome."""

    def __init__(
        self,
        work: Callable[[Mapping[str, str]], None],
        variables: Mapping[str, str],
        *,
        cancel: Callable[[], None] = lambda: None,
        lock_fd: int | None = None,
        log_path: str | os.PathLike | None = None,
        secrets: list[str] | tuple[str, ...] = (),
        timeout: float | None = None,
        footer: str | None = None,
    ):
        self.work, self.variables, self.cancel = work, variables, cancel
        self.lock_fd, self.log_path, self.secrets = lock_fd, log_path, secrets
        self.timeout, self.footer = timeout, footer
        self.interrupted: int | None = None
        self._cancelled_at: float | None = None
        self._done = threading.Event()
        self._code, self._error = 1, "the chunk's thread never ran"

    def start(self) -> None:
        route_output()
        self._started = time.monotonic()
        self._sink = self._open_log()
        held = os.dup(self.lock_fd) if self.lock_fd is not None else None
        thread = threading.Thread(target=self._main, args=(held,), daemon=True)
        try:
            thread.start()
        except BaseException:
            if held is not None:
                os.close(held)
            self._close_log()
            raise

    def _open_log(self) -> Sink:
        return open_log(self.log_path)

    def _main(self, held: int | None) -> None:
        writer = _route.writer = _ChunkWriter(self._sink, self.secrets)
        try:
            self.work(self.variables)
            self._code, self._error = 0, None
        except SystemExit as exc:
            self._code, self._error = self._exit(exc, writer)
        except BaseException as exc:  # the job's own failure: its chunk alone fails
            writer.write(_job_traceback(exc))
            self._code, self._error = 1, reason_of(exc)
        finally:
            if self._code and self.footer:
                writer.write(f"{self.footer}\n")
            _route.writer = None
            writer.close()
            self._close_log()
            if held is not None:
                os.close(held)  # the chunk's lock is free once the drain let go too
            self._done.set()

    @staticmethod
    def _exit(exc: SystemExit, writer: _ChunkWriter) -> tuple[int, str | None]:
        """``sys.exit()`` in the job's function, as the process would have ended."""
        if exc.code is None or exc.code == 0:
            return 0, None
        if isinstance(exc.code, int):
            return exc.code, None
        writer.write(f"{exc.code}\n")
        return 1, reason_of(Exception(str(exc.code))).removeprefix("Exception: ")

    def _close_log(self) -> None:
        fd, self._sink.fd = self._sink.fd, None
        if fd is not None:
            os.close(fd)

    def signal(self, number: int) -> None:
        """Stop the chunk: a signal the drain received."""
        self.interrupted = self.interrupted or number
        self._cancel()

    def pass_on(self, number: int) -> None:
        """In this process: it stops and goes on with it."""

    def _cancel(self) -> None:
        if self._cancelled_at is None:
            self._cancelled_at = time.monotonic()
            with contextlib.suppress(Exception):  # an engine that is gone has nothing to stop
                self.cancel()

    def wait(self) -> Outcome:
        """Wait for the chunk's thread (cancelled at its timeout; given up GIVE_UP_S
        after a cancel, the chunk's lock still held by the thread)."""
        timed_out = None
        while not self._done.wait(_POLL_S):
            now = time.monotonic()
            if (
                self.timeout is not None
                and timed_out is None
                and now - self._started > self.timeout
            ):
                timed_out = self.timeout
                self._cancel()
            elif self._cancelled_at is not None and now - self._cancelled_at > GIVE_UP_S:
                break
        duration = round(time.monotonic() - self._started, 3)
        lost = (self._sink.lost,) if self._sink.lost else ()
        code, error = (self._code, self._error) if self._done.is_set() else (1, None)
        return Outcome(code, duration, timed_out, self.interrupted, lost=lost, error=error)
