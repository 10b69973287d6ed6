"""Copying a job's output to RunJob's console and to the run's log.

The job writes into pipes; a :class:`~.watcher.Watcher` copies them out. Whatever
happens to a destination (a closed stdout, ``| head -1`` gone, a full disk under the
log) the pipes are read to their end: a destination that fails once is dropped and
named in the outcome, so the job never blocks on it. Writes go to raw descriptors,
never through Python's buffered streams, whose locks a blocked write would hold at exit.
"""

from __future__ import annotations

import _thread
import os
from collections.abc import Callable, Iterable

from ...store import address
from .logs import Redactor


def write_all(fd: int, data: bytes) -> None:
    """All of ``data`` to a raw descriptor (a pipe may take less than all at once)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


class Sink:
    """One destination: a raw descriptor; after its first write error it drops data."""

    def __init__(self, name: str, fd: int | None, lost: str | None = None):
        self.name, self.fd, self.lost = name, fd, lost

    @classmethod
    def console(cls, name: str, stream: object) -> Sink:
        """RunJob's stdout or stderr, if it has one (``RunJob ... >&-`` leaves none)."""
        try:
            return cls(name, stream.fileno())  # type: ignore[attr-defined]
        except OSError as exc:  # it failed before
            return cls(name, None, f"{name}: {exc}")
        except (AttributeError, ValueError):
            return cls(name, None, f"{name}: closed")

    def write(self, data: bytes) -> None:
        if self.fd is None or self.lost or not data:
            return
        try:
            write_all(self.fd, data)
        except OSError as exc:
            self.lost = f"{self.name}: {exc.strerror or exc}"


LOG_MAX_ENV = address.LOG_MAX_ENV  # a run's log stops growing there (the console gets all)
FREE_FLOOR = 64 << 20  # bytes the log leaves free on its disk: room for the store's finish


class LogSink(Sink):
    """A run's log file, cut (with a note) at DATAFLOW_LOG_MAX_MB megabytes, or earlier
    when its disk has less than FREE_FLOOR bytes free: a log never takes the room the
    store needs to record the run's end."""

    CHECK_EVERY = 1 << 20  # bytes between two looks at the disk's free space

    def __init__(self, fd: int | None, lost: str | None = None):
        super().__init__("log", fd, lost)
        self.written = 0
        self.checked = 0
        self.cut = False
        self.cap = int(log_max_mb() * (1 << 20))

    def write(self, data: bytes) -> None:
        if self.cut or self.fd is None or not data:
            return
        why = None
        if self.written + len(data) > self.cap:
            why = f"{log_max_mb():g} MB ({LOG_MAX_ENV})"
            data = data[: max(0, self.cap - self.written)]
        elif self.written - self.checked >= self.CHECK_EVERY:
            self.checked = self.written
            try:
                disk = os.fstatvfs(self.fd)
                if disk.f_bavail * disk.f_frsize < FREE_FLOOR:
                    why = "its disk is nearly full"
                    data = b""
            except OSError:
                pass
        super().write(data)
        self.written += len(data)
        if why:
            self.cut = True
            super().write(f"\n[dataflow: this log was cut here: {why}]\n".encode())


def log_max_mb() -> float:
    """``DATAFLOW_LOG_MAX_MB``: checked before the store was opened (a bad one refused)."""
    return address.log_max_mb()


class Tail(Sink):
    """The last bytes a job wrote, kept to name why it failed."""

    KEEP = 65536  # a PySpark traceback is followed by a Java stack trace: keep room

    def __init__(self):
        super().__init__("tail", None)
        self.data = bytearray()

    def write(self, data: bytes) -> None:
        self.data += data
        del self.data[: -self.KEEP]

    def exception(self) -> str | None:
        """The exception line of the last Python traceback: the first line after its
        ``Traceback (most recent call last):`` that is not indented (the frames are)."""
        text = self.data.decode("utf-8", "replace")
        start = text.rfind("Traceback (most recent call last):")
        if start < 0:
            return None
        for line in text[start:].splitlines()[1:]:
            if line.strip() and not line[0].isspace():
                return line.strip()[:500]
        return None


SAID_MAX = 300  # characters of a job's last words in its run's reason
# what is not a job's own words: Spark's log lines below ERROR (spark-log4j2.properties'
# pattern, Spark's default), and the frames of a Java stack trace
NOT_SAID = r"\d\d/\d\d/\d\d \d\d:\d\d:\d\d (?:TRACE|DEBUG|INFO|WARN) |\s+at |\s*\.\.\. \d+ more"


def last_words(data: bytes, limit: int = SAID_MAX) -> str | None:
    """The last lines a job wrote (to stderr: masked as its log), for the reason of a
    failed run: its non-blank lines, but Spark's own log lines and stack frames, joined
    by `` | `` and cut, from their start, to ``limit`` characters; control characters (a
    colour, a carriage return) dropped."""
    import re

    text = data.decode("utf-8", "replace")  # (a Tail: the last 64 KiB at most)
    lines = [line for line in text.splitlines() if not re.match(NOT_SAID, line)]
    lines = ["".join(c for c in line if c.isprintable()).strip() for line in lines]
    said = " | ".join(line for line in lines if line)
    if not said:
        return None
    return said if len(said) <= limit else "..." + said[len(said) - limit + 3 :]


def start_thread(function: Callable[[], object]) -> None:
    """Run ``function`` in a new thread, as a daemon, without waiting for the thread to
    start (``threading.Thread.start`` does: a drain starting a job would wait for a core
    to run the new thread on). Its caller learns of its end through what it reports."""
    _thread.start_new_thread(function, ())


class Copier:
    """Copies each pipe, with the job's secrets masked, to its sinks: a read at a time,
    as its :class:`~.watcher.Watcher` finds data there."""

    def __init__(self, routes: Iterable[tuple[object, Iterable[Sink]]], secrets: Iterable[str]):
        self.routes = {pipe: (Redactor(secrets), tuple(sinks)) for pipe, sinks in routes}

    def read(self, pipe: object) -> bool:
        """Copy what ``pipe`` holds now; False at its end."""
        redactor, sinks = self.routes[pipe]
        data = os.read(pipe.fileno(), 65536)  # type: ignore[attr-defined]
        for sink in sinks:
            sink.write(redactor.feed(data) if data else redactor.flush())
        return bool(data)

    def close(self) -> None:
        """What each pipe's masking held back, then the pipes closed (a grandchild that
        still holds one gets SIGPIPE, not a reader)."""
        for pipe, (redactor, sinks) in self.routes.items():
            rest = redactor.flush()
            for sink in sinks:
                sink.write(rest)
            pipe.close()  # type: ignore[attr-defined]

    def lost(self) -> list[str]:
        """The destinations that failed, with why."""
        sinks = {sink for _, sinks in self.routes.values() for sink in sinks}
        return sorted({sink.lost for sink in sinks if sink.lost})
