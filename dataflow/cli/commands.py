"""The registry of ``utility`` commands: each declares its name, summary and arguments."""

from __future__ import annotations

import argparse
import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ..errors import UsageError
from ..store import Store, locate
from ..store import open_store as _open
from . import output, say

Arguments = Callable[[argparse.ArgumentParser], None]
Handler = Callable[[argparse.Namespace], int]


@dataclass(frozen=True)
class Command:
    name: str
    summary: str
    run: Handler
    arguments: Arguments | None


COMMANDS: dict[str, Command] = {}


def command(name: str, summary: str, arguments: Arguments | None = None):
    """Register a ``utility`` command."""

    def register(func: Handler) -> Handler:
        COMMANDS[name] = Command(name, summary, func, arguments)
        return func

    return register


def count(text: str) -> int:
    """A whole number from 1 to a million (a --limit, an --attempt)."""
    try:
        number = int(text)
    except ValueError:
        number = 0
    if not 1 <= number <= 1_000_000:
        raise argparse.ArgumentTypeError(f"must be a whole number from 1 to 1000000, not '{text}'")
    return number


def positional(*names: str, optional: tuple[str, ...] = ()) -> Arguments:
    """Arguments for commands that take only plain words (``JOBID DATAID``)."""

    def add(parser: argparse.ArgumentParser) -> None:
        for name in names:
            parser.add_argument(name)
        for name in optional:
            parser.add_argument(name, nargs="?")

    return add


def open_store(
    options: argparse.Namespace, readonly: bool = False, retired_ok: bool = False
) -> Store:
    """The store of ``--db``; ``readonly`` for commands that only read; ``retired_ok``
    for the few that a retired store still answers (its history, for audit)."""
    return _open(locate(options.db), readonly, retired_ok)


def show(options: argparse.Namespace, rows: list[dict]) -> int:
    """Print dict rows as the seed's table, or JSON with --json."""
    say(output.records(rows, options.json))
    return 0


def write_whole(target: Path, text: str) -> None:
    """Write beside the target, then rename: nobody sees half a file, a failure leaves none."""
    try:
        handle, temporary = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.")
    except OSError as exc:
        raise UsageError(f"cannot write {target}: {exc.strerror}") from None
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(text)
        os.chmod(temporary, 0o644)  # mkstemp's 0600 would hide a page from a web server
        os.replace(temporary, target)
    except OSError as exc:
        Path(temporary).unlink(missing_ok=True)
        raise UsageError(f"cannot write {target}: {exc.strerror}") from None
