"""The registry of ``utility`` commands: each declares its name, summary and arguments."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass

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


def positional(*names: str, optional: tuple[str, ...] = ()) -> Arguments:
    """Arguments for commands that take only plain words (``JOBID DATAID``)."""

    def add(parser: argparse.ArgumentParser) -> None:
        for name in names:
            parser.add_argument(name)
        for name in optional:
            parser.add_argument(name, nargs="?")

    return add


def open_store(options: argparse.Namespace) -> Store:
    return _open(locate(options.db))


def show(options: argparse.Namespace, rows: list[dict]) -> int:
    """Print dict rows as the seed's table, or JSON with --json."""
    say(output.records(rows, options.json))
    return 0
