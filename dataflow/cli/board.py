"""``utility board``: write the status board page to a file."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from ..errors import UsageError
from ..ops import board
from ..store import locate, now, open_store, shown
from . import say, say_lines
from .commands import command, write_whole


def _arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--html", metavar="FILE", help="the page to write")
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
    "write the status board: one HTML page of jobs x dataids coloured by status"
    " (--json: print it for scripts)",
    _arguments,
)
def write(options: argparse.Namespace) -> int:
    if options.last < 1:
        raise UsageError(f"--last must be at least 1, not {options.last}")
    if not options.html and not options.json:
        raise UsageError("board needs --html FILE (the page to write) or --json")
    path = locate(options.db)
    with open_store(path, readonly=True) as store:
        grid = board.collect(store, options.job, options.last)
    if options.html:
        page = board.render(grid, generated=now()[:19], source=shown(path))
        write_whole(Path(options.html), page)
    if options.json:
        say_lines(json.dumps(board.as_json(grid), indent=2, default=str))
    else:
        jobs_n, dataids_n = len(grid.jobs), len(grid.dataids)
        say(
            f"board written to {options.html} ({jobs_n} job{'' if jobs_n == 1 else 's'}, "
            f"{dataids_n} dataid{'' if dataids_n == 1 else 's'})"
        )
    return 0
