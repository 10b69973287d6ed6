"""What a drain tells of as it goes (:class:`Event`) and what it did (:class:`Summary`)."""

from __future__ import annotations

import time
from collections import namedtuple
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .runner import Outcome


class Event(
    namedtuple(
        "Event",
        "kind dataid claim outcome status counts live cap",
        defaults=("", None, None, "", (0, 0), 0, None),
    )
):
    """Something a person may want to see: ``abandoned``, ``cap_full``, ``launch``,
    ``ending`` (the job ended, its status not yet recorded), ``ended``, ``fenced`` (its
    result refused: status says why), ``store`` (the store failed for a while and the
    drain went on: status says how long and why), ``unusable`` (a candidate skipped:
    status says why) or ``cramped`` (a job could not start for want of descriptors,
    processes or memory, and the drain goes on with fewer at once: status says so).
    counts: OUT rows updated and IN rows released; live and cap: for ``cap_full``."""

    __slots__ = ()


class Summary:
    """What a drain did so far."""

    def __init__(self) -> None:
        # fenced: results refused, their chunks taken from them meanwhile
        self.started = self.ready = self.failed = self.running = self.fenced = 0
        self.cap_full = False
        self.interrupted: int | None = None
        self.last: Outcome | None = None
        self.began = time.monotonic()

    @property
    def elapsed(self) -> float:
        return time.monotonic() - self.began
