"""``utility board``: write the status board page to a file."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..errors import UsageError
from ..ops import board
from ..run import lifecycle
from ..store import locate, now, open_store, shown
from . import say
from .commands import command, write_whole


def _arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--html", required=True, metavar="FILE", help="the page to write")
    parser.add_argument("--job", metavar="J", help="only this job")
    parser.add_argument(
        "--last",
        type=int,
        default=board.DEFAULT_LAST,
        metavar="N",
        help=f"show the newest N dataids (default {board.DEFAULT_LAST})",
    )


@command(
    "board",
    "write the status board: one HTML page of jobs x dataids coloured by status",
    _arguments,
)
def write(options: argparse.Namespace) -> int:
    if options.last < 1:
        raise UsageError(f"--last must be at least 1, not {options.last}")
    path = locate(options.db)
    with open_store(path, readonly=True) as store:
        if options.job:
            lifecycle.load_job(store, options.job)  # an unknown job is an error, not an empty page
        rows = store.board(options.job)
    grid = board.build(rows, options.last)
    write_whole(Path(options.html), board.render(grid, generated=now()[:19], source=shown(path)))
    say(f"board written to {options.html} ({len(grid.jobs)} jobs, {len(grid.dataids)} dataids)")
    return 0
