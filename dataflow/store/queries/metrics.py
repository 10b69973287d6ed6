"""What ``/metrics`` reads of the run history at each scrape, as every backend runs it over
its own named queries: counts grouped by job, and histograms counted in SQL in one pass
(each run's bucket), so a scrape reads a few rows per job however long the history."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..base import Row
from . import NamedQueries


class MetricQueries:
    conn: Any
    q: NamedQueries

    def run_counts(self, abandoned: str) -> list[Row]:
        """Per job of the run history: its runs (``started``), those FAILED (``failed``),
        and those of them whose reason starts with ``abandoned`` (``abandoned``)."""
        rows = self.conn.execute(self.q.run_counts, {"abandoned": f"{abandoned}%"})
        return [dict(row) for row in rows]

    def run_durations(self, bounds: Sequence[float]) -> list[Row]:
        """The durations of finished runs, per job and bucket: a row per job and ``le``
        (the smallest of ``bounds`` at or above a run's seconds; None: above them all)
        with its ``runs`` and their ``seconds`` in all. Not cumulative."""
        params = {"bounds": _json_list(bounds)}
        return [dict(row) for row in self.conn.execute(self.q.run_durations, params)]

    def claim_latencies(self, bounds: Sequence[float]) -> list[Row]:
        """As :meth:`run_durations`, of the seconds from the moment a chunk's inputs were
        all READY (the newest ``modified`` of their READY OUT rows, as the store holds them
        now, no later than the run's start) to the start of its first run (attempt 1). A
        job whose inputs have no rows (``today``, a clock) has none."""
        params = {"bounds": _json_list(bounds)}
        return [dict(row) for row in self.conn.execute(self.q.claim_latencies, params)]


def _json_list(values: Sequence[float]) -> str:
    """``values`` as a JSON array, json imported here only: the store's mixins are on
    every RunJob's path, and json is not (~1.5 ms to import)."""
    import json

    return json.dumps(list(values))
