"""What ``/metrics`` reads of the run history, as every backend runs it over its own named
queries: counts grouped by job, and histograms counted in SQL in one pass (each run's
bucket), of the runs in a range of runids, so that a server reads the runs that ended
long ago once (:mod:`dataflow.serve.runhistory`) and at each scrape only the recent ones."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager

from ..connector import DRIVER_ERRORS
from ..records import Row
from . import NamedQueries

TYPE_CHECKING = False  # typing's flag, without importing typing (a run's start)
if TYPE_CHECKING:
    from typing import Any

# the runids a store may hold (64-bit integers): a run written by hand may be numbered
# anywhere in them, below 0 too
LOWEST, EVERY = -(2**63), 2**63 - 1


class MetricQueries:
    conn: Any
    q: NamedQueries
    transaction: Any

    def run_counts(self, abandoned: str, low: int = LOWEST, high: int = EVERY) -> list[Row]:
        """Per job, of the runs from runid ``low`` up to (not with) ``high``: its runs
        (``started``), those FAILED (``failed``), and those of them whose reason starts
        with ``abandoned`` (``abandoned``)."""
        params = {"abandoned": f"{abandoned}%", "low": low, "high": high}
        return [dict(row) for row in self.conn.execute(self.q.run_counts, params)]

    def run_durations(
        self, bounds: Sequence[float], low: int = LOWEST, high: int = EVERY
    ) -> list[Row]:
        """The durations of finished runs (of runids ``low`` to ``high``, as in
        :meth:`run_counts`), per job and bucket: a row per job and ``le`` (the smallest of
        ``bounds`` at or above a run's seconds; None: above them all) with its ``runs``
        and their ``seconds`` in all. Not cumulative."""
        params = {"bounds": _json_list(bounds), "low": low, "high": high}
        return [dict(row) for row in self.conn.execute(self.q.run_durations, params)]

    def claim_latencies(
        self, bounds: Sequence[float], low: int = LOWEST, high: int = EVERY
    ) -> list[Row]:
        """As :meth:`run_durations`, of the seconds from the moment a chunk's inputs were
        all READY (the newest ``modified`` of their READY OUT rows, as the store holds them
        now, no later than the run's start) to the start of its first run (attempt 1). A
        job whose inputs have no rows (``today``, a clock) has none."""
        params = {"bounds": _json_list(bounds), "low": low, "high": high}
        return [dict(row) for row in self.conn.execute(self.q.claim_latencies, params)]

    def first_running_run(self, low: int) -> int | None:
        """The oldest runid from ``low`` on whose run has not ended; None if every one has."""
        return self.conn.execute(self.q.first_running_run, {"low": low}).fetchone()[0]

    def next_runid(self) -> int:
        """One above the newest runid (1 for an empty history; at most ``EVERY``)."""
        return min(int(self.conn.execute(self.q.newest_runid).fetchone()[0]) + 1, EVERY)

    def settle_runs(self, low: int) -> int | None:
        """The runid below which every run has ended and none is written any more but by
        hand: the oldest run not ended from ``low`` on, else one above the newest. It is
        raised into the store's mark (:meth:`run_mark`), so that a deletion below it is
        counted from now on. None when it cannot be raised now (a store this process may
        not write, a writer that holds it). Not inside another transaction."""
        try:
            with self.settling():
                first_live = self.first_running_run(low)
                point = self.next_runid() if first_live is None else first_live
                self.conn.execute(self.q.raise_run_mark, {"below": point})
                return point
        except Exception as exc:
            if self.unsettled(exc):
                return None
            raise

    def settling(self) -> AbstractContextManager[None]:
        """The transaction of :meth:`settle_runs`: no writer of run is under way in it."""
        return self.transaction()

    def unsettled(self, exc: BaseException) -> bool:
        """Does ``exc`` say that runs cannot be settled now? Any driver error does (a
        store this process may not write, a writer that holds it longer than
        :meth:`settling` waits): the scrape settles nothing this time, and its reads say
        what a failure of the store's means."""
        return isinstance(exc, tuple(DRIVER_ERRORS))

    def run_mark(self) -> tuple[int, int] | None:
        """The store's mark: the runid below which some server counted the runs (never
        lowered), and how many runs below it were deleted since; None if it is gone (a
        store writer's doing)."""
        below, changes = self.conn.execute(self.q.run_mark).fetchone()
        return None if below is None or changes is None else (int(below), int(changes))

    def run_total(self) -> tuple[int, int]:
        """How many runs the history holds, and the sum of their runids modulo a prime
        (as :meth:`run_counts`' ``runids``)."""
        runs, runids = self.conn.execute(self.q.run_total).fetchone()
        return int(runs), int(runids)

    @contextmanager
    def snapshot(self) -> Iterator[None]:
        """The reads inside see the store as it was at the first of them (a read-only
        transaction: writers go on meanwhile). Not inside another transaction."""
        self.conn.execute(self.q.begin_snapshot)
        try:
            yield
        finally:
            self.conn.execute(self.q.end_snapshot)


def _json_list(values: Sequence[float]) -> str:
    """``values`` as a JSON array, json imported here only: the store's mixins are on
    every RunJob's path, and json is not (~1.5 ms to import)."""
    import json

    return json.dumps(list(values))
