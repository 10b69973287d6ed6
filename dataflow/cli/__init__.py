"""Command-line entry points: ``RunJob`` and ``utility``. Thin: parse, call, print.

May import: ops, run, spark, store, serve, errors, crypto.

``serve`` (Starlette, uvicorn) only inside ``utility serve``'s function: no other
command imports it.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
from collections.abc import Callable
from typing import NoReturn

from ..errors import DataflowError, UsageError
from ..store import DRIVER_ERRORS


def stamp() -> str:
    """The time as `date` prints it in the seed: ``Mon Dec  1 04:08:50 PM CST 2025``."""
    return time.strftime("%a %b %e %I:%M:%S %p %Z %Y")


def say(message: str) -> None:
    """Print a line. A stdout that fails (closed, ``| head -1`` gone, a full disk) is
    reported once on stderr and dropped: RunJob must go on and record its chunk."""
    if sys.stdout is None or isinstance(sys.stdout, _LostStream):
        return
    try:
        print(message, flush=True)
    except (OSError, ValueError) as exc:
        why = getattr(exc, "strerror", None) or str(exc)
        if not isinstance(exc, BrokenPipeError):  # `| head` is no news to the one who typed it
            warn(f"stdout: {why}; further output to it is dropped")
        with contextlib.suppress(OSError, ValueError):  # so that the flush at exit is quiet
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.stdout = _LostStream(why)  # a job's output is not copied to it either


class _LostStream:
    """What stdout becomes once it failed: takes text and drops it, has no descriptor."""

    def __init__(self, why: str):
        self.why = why

    def write(self, text: str) -> int:
        return len(text)

    def flush(self) -> None:
        pass

    def fileno(self) -> int:
        raise OSError(self.why)


def printable(text: str) -> str:
    """A text for one line of a terminal: control characters, and bytes that were not
    UTF-8, escaped as Python writes them (``\\x00``, ``\\udcff``)."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def warn(message: str) -> None:
    with contextlib.suppress(OSError, ValueError, AttributeError):
        print(f"warning: {message}", file=sys.stderr, flush=True)


def fail(message: str) -> None:
    print(f"error: {message}", file=sys.stderr, flush=True)


class Parser(argparse.ArgumentParser):
    """argparse whose usage mistakes are one ``error: ...`` line and exit 2, as every
    other mistake (argparse prints the usage text above its own line)."""

    def error(self, message: str) -> NoReturn:
        fail(f"{message} (see '{self.prog} --help')")
        self.exit(2)


def guarded(command: Callable[[], int]) -> int:
    """The one place user errors become ``error: ...`` on stderr and an exit code."""
    for stream in (sys.stdout, sys.stderr):  # stored bytes that are not UTF-8 print as \xff
        with contextlib.suppress(AttributeError, ValueError):
            stream.reconfigure(errors="backslashreplace")  # type: ignore[union-attr]
    try:
        return command()
    except DataflowError as exc:
        fail(str(exc))
        return exc.exit_code
    except tuple(DRIVER_ERRORS) as exc:  # the store itself failed: disk full, I/O error...
        fail(f"store error: {' '.join(str(exc).split())}")  # a driver's DETAIL: one line
        return 3
    except BrokenPipeError:  # `utility runs | head`
        return 141
    except KeyboardInterrupt:
        return 130


def text_arguments(argv: list[str]) -> list[str]:
    """The arguments, refused unless each is UTF-8 text: Python hands other bytes on as
    surrogate escapes, which neither SQLite nor a terminal accepts."""
    for number, word in enumerate(argv, 1):
        try:
            word.encode("utf-8")
        except UnicodeEncodeError:
            shown = word.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
            raise UsageError(f"argument {number} ('{shown}') is not valid UTF-8 text") from None
    return argv
