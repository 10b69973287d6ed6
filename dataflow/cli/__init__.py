"""Command-line entry points: ``RunJob`` and ``utility``. Thin: parse, call, print.

May import: ops, run, spark, store, errors, crypto.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable

from ..errors import DataflowError
from ..store import DRIVER_ERRORS


def stamp() -> str:
    """The time as `date` prints it in the seed: ``Mon Dec  1 04:08:50 PM CST 2025``."""
    return time.strftime("%a %b %e %I:%M:%S %p %Z %Y")


def say(message: str) -> None:
    print(message, flush=True)


def fail(message: str) -> None:
    print(f"error: {message}", file=sys.stderr, flush=True)


def guarded(command: Callable[[], int]) -> int:
    """The one place user errors become ``error: ...`` on stderr and an exit code."""
    try:
        return command()
    except DataflowError as exc:
        fail(str(exc))
        return exc.exit_code
    except tuple(DRIVER_ERRORS) as exc:  # the store itself failed: disk full, I/O error...
        fail(f"store error: {exc}")
        return 3
    except BrokenPipeError:  # `utility runs | head`
        return 141
    except KeyboardInterrupt:
        return 130
