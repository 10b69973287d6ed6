"""The face every drain shows the process that runs it (:class:`Draining`), for readers
and type checkers: a plain run imports nothing of ``typing`` (tests/test_startup_imports.py),
so the modules that name it import it under ``TYPE_CHECKING`` only, and
tests/test_drain_face.py checks that each drain shows it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from .events import Summary


class Draining(Protocol):
    """What runs a job's chunks, as its process sees it: :class:`.drain.Drain` (jobs as
    child processes), :class:`.driven.DriverDrain` (one Spark driver or Connect client)
    and :class:`.workers.WorkerDrain` (spread over worker processes). :mod:`.foreground`
    runs any of them the same way, and RunJob's report reads ``summary`` as it goes."""

    summary: Summary  # what it did so far: the report's progress line reads it

    def run(self) -> Summary:
        """Claim and run chunks until none is left to claim (or one, for a plain RunJob),
        or until stopped; what happened."""
        ...

    def stop(self, number: int) -> None:
        """Signal ``number`` came: claim no more, and pass it on to the running jobs."""
        ...

    def pass_on(self, number: int) -> None:
        """Pass signal ``number`` to the running jobs (a terminal's ^Z, fg, bg)."""
        ...

    def left(self) -> int:
        """Chunks still waiting for the job (approximate: stale candidates count too)."""
        ...
