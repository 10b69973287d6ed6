"""``utility chunks``: the chunks' newest status rows; ``utility runs``, the seed's name for
it, kept (its quickstart types ``utility.sh runs``). The runs themselves, one row per
attempt, are ``utility history``'s."""

from __future__ import annotations

import argparse

from . import output, say
from .commands import command, count, open_store


def _arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--limit", type=count, default=20, help="how many (default 20)")


@command(
    "chunks",
    "list the newest status rows of chunks (OUT rows of datastatus), newest first; runs "
    "(one row per attempt): see history",
    _arguments,
)
def chunks(options: argparse.Namespace) -> int:
    with open_store(options, readonly=True) as store:
        rows = store.runs(options.limit)
    say(output.records(rows, options.json))
    return 0


command(
    "runs",
    "the seed's name for 'chunks', kept: the newest status rows of chunks, not runs",
    _arguments,
)(chunks)
