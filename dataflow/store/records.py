"""The shapes of what a store returns and the times it records: plain rows, a job's
items, a job's rows at a chunk. Apart from :mod:`.base` so that the operations of
:mod:`.queries` (which :class:`.base.Store` is made of) can use them."""

from __future__ import annotations

from collections import namedtuple
from collections.abc import Sequence
from datetime import datetime

Row = dict[str, object]

# named tuples, not dataclasses: see run.claim.settings.Settings
JobItem = namedtuple("JobItem", "itemtype datasetid itemvalue")  # one row of table job
ChunkRow = namedtuple("ChunkRow", "datasetid locktype status")  # a job's datastatus row


def capped(items: Sequence[JobItem]) -> bool:
    """Has the job a ``max_parallel`` row (set or not: see run.claim.settings.Settings)?"""
    return any(item.itemtype == "max_parallel" for item in items)


def now() -> str:
    """Local time as the seed stores it: ``YYYY-MM-DD HH:MM:SS.ffffff``."""
    return datetime.now().strftime("%Y-%m-%d %H:%M:%S.%f")


def zoned_now() -> str:
    """Local time with its UTC offset, ``YYYY-MM-DD HH:MM:SS.ffffff+HH:MM``: the run
    history's times, which two hosts or a change of daylight saving time must not mix up."""
    return datetime.now().astimezone().isoformat(sep=" ", timespec="microseconds")
