"""Command-line entry points: ``RunJob`` and ``utility``. Thin: parse, call the library
(:mod:`dataflow.api` where an operation has more than one step), print.

May import: api, ops, run, spark, store, serve, errors, crypto, policy, landing.

``serve`` (Starlette, uvicorn) only inside ``utility serve``'s function: no other
command imports it.
"""

from __future__ import annotations

import contextlib
import gc
import os
import sys
import time
from collections.abc import Callable

from ..errors import DataflowError, UsageError
from ..store import DRIVER_ERRORS

TYPE_CHECKING = False  # typing's flag, without importing typing (a run's start)
if TYPE_CHECKING:
    from typing import Any, NoReturn


def stamp() -> str:
    """The time as `date` prints it in the seed: ``Mon Dec  1 04:08:50 PM CST 2025``."""
    return time.strftime("%a %b %e %I:%M:%S %p %Z %Y")


class Lines(str):
    """A block of lines whose line breaks are ours (a table, JSON), not a value's."""


def say(message: str) -> None:
    """Print one line, its control characters escaped (:func:`printable`): a dataid or a
    job name that holds a newline or an escape sequence stays on its line and inert. A
    :class:`Lines` block (``output.listing`` returns one) is printed line by line."""
    if isinstance(message, Lines):
        _out("\n".join(printable(line) for line in message.split("\n")))
    else:
        _out(printable(message))


def say_lines(text: str) -> None:
    """Print a block whose line breaks are ours (JSON we dumped): every line escaped."""
    say(Lines(text))


def _out(message: str) -> None:
    """Print. A stdout that fails (closed, ``| head -1`` gone, a full disk) is
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


# C0 controls (newline, ESC, NUL...), DEL, C1 controls and the Unicode line separators,
# as Python's repr writes them; every other character, any script's, is printed as it is
_CONTROLS = {
    code: repr(chr(code))[1:-1] for code in (*range(0x20), *range(0x7F, 0xA0), 0x2028, 0x2029)
}


def printable(text: object) -> str:
    """A text for one line of a terminal, whoever wrote it into the store: control
    characters escaped as Python writes them (``\\n``, ``\\x1b``, ``\\x00``). Bytes
    that were not UTF-8 are escaped by the streams (``\\udcff``, see :func:`guarded`).
    The one rule of every line the CLIs print."""
    return str(text).translate(_CONTROLS)


_LOG_CONTROLS = {code: text for code, text in _CONTROLS.items() if code not in (0x09, 0x0A)}


def printable_lines(data: bytes) -> bytes:
    """A log for a terminal: :func:`printable`, lines and tabs kept (a log read from the
    store is any writer's: it must not drive the reader's terminal)."""
    return data.decode("utf-8", "replace").translate(_LOG_CONTROLS).encode()


def warn(message: str) -> None:
    with contextlib.suppress(OSError, ValueError, AttributeError):
        print(f"warning: {printable(message)}", file=sys.stderr, flush=True)


def fail(message: str) -> None:
    print(f"error: {printable(message)}", file=sys.stderr, flush=True)


def _parser_class() -> type:
    import argparse

    class Parser(argparse.ArgumentParser):
        """argparse whose usage mistakes are one ``error: ...`` line and exit 2, as every
        other mistake (argparse prints the usage text above its own line)."""

        def error(self, message: str) -> NoReturn:
            fail(f"{message} (see '{self.prog} --help')")
            self.exit(2)

    return Parser


def __getattr__(name: str) -> Any:
    """``Parser``, made at its first use: RunJob's common call (a script, no option)
    parses without argparse, whose import costs every cron tick ~2 ms."""
    if name == "Parser":
        globals()["Parser"] = found = _parser_class()
        return found
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def launching(name: str) -> None:
    """This process starts jobs: their exit codes kept (SIGCHLD at its default), and its
    name as ``ps``, ``pgrep`` and ``killall`` read it ``name`` (bin/RunJob runs Python
    with ``-c``: its name would be "python")."""
    from ..run.process.processes import keep_exit_codes

    keep_exit_codes()
    with contextlib.suppress(OSError), open("/proc/self/comm", "w") as comm:  # (Linux only)
        comm.write(name)


def exiting(code: int) -> int:
    """``code``, for a command that is its process's whole work (it exits next). What it
    made is left to the exit: the collection the interpreter makes as it exits would look
    at every object again (some 20 ms once psycopg is loaded) to free nothing that matters,
    since stores and keepers are closed by then."""
    gc.freeze()
    return code


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
    except OSError as exc:  # a path the system refuses (too long, a loop...): said, not traced
        name = str(exc.filename or "")
        name = name if len(name) <= 120 else f"{name[:60]}...{name[-40:]}"
        fail(f"{name + ': ' if name else ''}{exc.strerror or exc}")
        return 2
    except KeyboardInterrupt:
        return 130


def hide_argument(word: str) -> bool:
    """Take ``word`` (a passkey given on the command line, the seed's form) out of this
    process's command line as other processes see it (``/proc/PID/cmdline``, ``ps``),
    and so out of every process forked from it: the arguments after it move over it,
    the end is zeroed. Linux only; False where it cannot be done."""
    if sys.platform != "linux" or not word:
        return False
    try:
        with open("/proc/self/stat", "rb") as handle:
            stat = handle.read()
        fields = stat[stat.rindex(b")") + 2 :].split()  # fields from the 3rd on
        start, end = int(fields[45]), int(fields[46])  # arg_start, arg_end (48, 49)
        import ctypes  # only here: most starts never need it

        if not 0 < start < end or end - start > 1 << 20:
            return False
        words = ctypes.string_at(start, end - start).split(b"\0")
        secret = os.fsencode(word)
        if secret not in words[1:]:
            return False
        words.remove(secret)  # the first: the program's own name is never the passkey
        hidden = b"\0".join(words).ljust(end - start, b"\0")
        ctypes.memmove(start, hidden, end - start)
        return secret not in ctypes.string_at(start, end - start).split(b"\0")
    except (OSError, ValueError, IndexError):
        return False


def seed_passkey_given(passkey: str) -> None:
    """A passkey given as an argument: hidden from other processes, or said to be seen."""
    if not hide_argument(passkey):
        warn(
            "the passkey on the command line can be read by other processes of this host "
            "(ps); set PASSKEY_FILE to a file that holds it instead"
        )


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
