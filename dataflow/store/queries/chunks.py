"""A chunk's claim and finish as every backend runs them: which named query, with which
parameters, and the shape of what it returns (the SQL is the backend's own). The claim's
own read of the candidates is the backend's (:meth:`.connector.Connector.candidates`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ...dataids import check_name, natural_key
from ..records import ChunkRow, Row, capped
from . import NamedQueries

TYPE_CHECKING = False  # typing's flag, without importing typing (a run's start)
if TYPE_CHECKING:
    from typing import Any


class ChunkQueries:
    conn: Any  # the backend's connection: execute(sql, params), executemany(sql, rows)
    q: NamedQueries
    marks: Callable[[int], str]  # n placeholders, comma separated

    # -- the claim ---------------------------------------------------------------------

    def job_and_candidates(self, jobid: str, limit: int, inputs: Sequence[str]) -> tuple:
        """:meth:`job_items`, and the first ``limit`` :meth:`candidates` (None for a job
        with a ``max_parallel`` row: its claim takes the job's turn before it asks). A store
        may read them and their :meth:`chunk_facts` with ``inputs`` in one round trip."""
        items = self.job_items(jobid)
        return items, None if capped(items) else self.candidates(jobid, limit)

    def drop_candidate(self, jobid: str, sortkey: str, dataid: str) -> None:
        """Take a (sortkey, dataid) pair off the job's candidates."""
        self.conn.execute(self.q.drop_candidate, (jobid, sortkey, dataid))

    def put_candidate(self, jobid: str, dataid: str) -> None:
        """Offer a dataid to a job, under its natural sort key (computed here)."""
        self.conn.execute(self.q.put_candidate, (jobid, natural_key(dataid), dataid))

    def count_candidates(self, jobid: str) -> int:
        """How many candidates the job has (stale ones too)."""
        return self.conn.execute(self.q.count_candidates, (jobid,)).fetchone()[0]

    def ready_inputs(self, datasetids: Sequence[str], dataid: str) -> int:
        """How many of these datasets have a READY output row at ``dataid``."""
        if not datasetids:
            return 0
        return self._ask_ready(datasetids, dataid).fetchone()[0]

    def _ask_ready(self, datasetids: Sequence[str], dataid: str):
        sql = self.q.ready_inputs.format(marks=self.marks(len(datasetids)))
        return self.conn.execute(sql, (*datasetids, dataid))

    def chunk_rows(self, jobid: str, dataid: str) -> list[ChunkRow]:
        """The job's own datastatus rows (OUT and IN) at ``dataid``."""
        rows = self.conn.execute(self.q.chunk_rows, (jobid, dataid))
        return [ChunkRow(*row) for row in rows]

    def chunk_facts(
        self, jobid: str, inputs: Sequence[str], dataids: Sequence[str]
    ) -> list[tuple[list[ChunkRow], Row | None, int]]:
        """What a claim reads of each chunk: the job's rows there, the chunk's last run
        and how many of ``inputs`` are READY there (a store may ask for all at once)."""
        return [
            (self.chunk_rows(jobid, d), self.last_run(jobid, d), self.ready_inputs(inputs, d))
            for d in dataids
        ]

    def mark_running(
        self, jobid: str, dataid: str, outputs: Sequence[str], inputs: Sequence[str]
    ) -> None:
        """Record a claim: OUT/RUNNING for each output, IN/RUNNING for each input."""
        rows = [(d, jobid, dataid, "OUT") for d in outputs]
        rows += [(d, jobid, dataid, "IN") for d in inputs]
        self.conn.executemany(self.q.mark_running, rows)

    def record_claims(
        self,
        jobid: str,
        taken: Sequence[tuple[str, str]],
        outputs: Sequence[str],
        inputs: Sequence[str],
        runs: Sequence[dict[str, object]],
    ) -> list[int]:
        """Record the claims of these (sortkey, dataid) candidates, locked: each one
        dropped, its rows RUNNING (:meth:`mark_running`), its history row (``runs``, in
        the same order) inserted; their runids (a store may write each part of all the
        claims in one statement)."""
        for key, dataid in taken:
            self.drop_candidate(jobid, key, dataid)  # the triggers know exact keys only
            self.mark_running(jobid, dataid, outputs, inputs)
        return self.start_runs(runs)

    def finish(self, jobid: str, dataid: str, status: str) -> tuple[int, int]:
        """Set the job's OUT rows at ``dataid`` to ``status`` and release its IN rows (both
        sent before either count is read: one round trip in a pipeline)."""
        updated = self.conn.execute(self.q.set_out_status, (status, jobid, dataid))
        released = self.conn.execute(self.q.drop_inputs, (jobid, dataid))
        return updated.rowcount, released.rowcount

    def set_out_status(self, jobid: str, dataid: str, status: str) -> int:
        """Set the job's OUT rows at ``dataid`` to ``status``; rows changed."""
        return self.conn.execute(self.q.set_out_status, (status, jobid, dataid)).rowcount

    def put_out_status(
        self, jobid: str, dataid: str, datasetids: Sequence[str], status: str
    ) -> int:
        """Create or set OUT rows of ``jobid`` at ``dataid`` to ``status``; rows changed."""
        check_name("dataid", dataid)
        changed = 0
        for datasetid in datasetids:
            params = (datasetid, jobid, dataid, status)
            changed += self.conn.execute(self.q.put_out_status, params).rowcount
        return changed

    def delete_chunk(self, jobid: str, dataid: str) -> int:
        """Delete every datastatus row of the job at ``dataid``."""
        return self.conn.execute(self.q.delete_chunk, (jobid, dataid)).rowcount

    def running(self, jobid: str | None = None) -> list[tuple[str, str]]:
        """(jobid, dataid) of every chunk whose OUT rows say RUNNING."""
        if jobid is None:
            return [tuple(row) for row in self.conn.execute(self.q.running)]
        return [tuple(row) for row in self.conn.execute(self.q.running_of_job, (jobid,))]

    def count_running(self, jobid: str) -> int:
        """How many chunks of the job say RUNNING (live runs, once the dead are recovered)."""
        return self.conn.execute(self.q.count_running, (jobid,)).fetchone()[0]

    # -- claims that are taken back ------------------------------------------------------

    def readers(self, datasetids: Sequence[str], dataid: str) -> list[str]:
        """Jobs holding an IN row on one of these datasets at ``dataid`` (reading it)."""
        if not datasetids:
            return []
        sql = self.q.readers.format(marks=self.marks(len(datasetids)))
        return [row[0] for row in self.conn.execute(sql, (dataid, *datasetids))]

    def release_claim(
        self, jobid: str, dataid: str, runid: int, previous: Sequence[ChunkRow]
    ) -> None:
        """Undo a claim: the job's rows at ``dataid`` back to ``previous``, its history
        row ``runid`` deleted."""
        self.conn.execute(self.q.delete_run, (runid,))
        self.conn.execute(self.q.drop_inputs, (jobid, dataid))
        kept = {row.datasetid: row for row in previous if row.locktype == "OUT"}
        for (datasetid,) in self.conn.execute(self.q.out_datasets, (jobid, dataid)).fetchall():
            if datasetid in kept:
                params = (kept[datasetid].status, jobid, dataid, datasetid)
                self.conn.execute(self.q.set_row_status, params)
            else:
                self.conn.execute(self.q.delete_row, (jobid, dataid, datasetid))
