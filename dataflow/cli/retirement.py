"""``utility unretire``: take back a store that ``copy-store --retire`` retired."""

from __future__ import annotations

import argparse

from ..store import locate, moved, shown
from . import say
from .commands import command, open_store


@command(
    "unretire",
    "remove the mark 'copy-store --retire' left: this store accepts work again",
)
def unretire(options: argparse.Namespace) -> int:
    with open_store(options, retired_ok=True) as store, store.transaction():
        found = moved.moved_to(store)
        moved.unretire(store)
    if found:
        say(
            f"{shown(locate(options.db))} accepts work again (it had moved to {found[0]}): "
            "make sure no cron line runs the same jobs on both stores"
        )
    else:
        say(f"{shown(locate(options.db))} was not retired")
    return 0
