"""A chunk's claim and finish as every backend runs them: which named query, with which
parameters, and the shape of what it returns (the SQL is the backend's own)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ...dataids import check_name
from ..base import ChunkRow
from . import NamedQueries


class ChunkQueries:
    conn: Any  # the backend's connection: execute(sql, params), executemany(sql, rows)
    q: NamedQueries
    marks: Callable[[int], str]  # n placeholders, comma separated

    def drop_candidate(self, jobid: str, sortkey: str, dataid: str) -> None:
        self.conn.execute(self.q.drop_candidate, (jobid, sortkey, dataid))

    def count_candidates(self, jobid: str) -> int:
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

    def mark_running(
        self, jobid: str, dataid: str, outputs: Sequence[str], inputs: Sequence[str]
    ) -> None:
        """Record a claim: OUT/RUNNING for each output, IN/RUNNING for each input."""
        rows = [(d, jobid, dataid, "OUT") for d in outputs]
        rows += [(d, jobid, dataid, "IN") for d in inputs]
        self.conn.executemany(self.q.mark_running, rows)

    def finish(self, jobid: str, dataid: str, status: str) -> tuple[int, int]:
        """Set the job's OUT rows at ``dataid`` to ``status`` and release its IN rows (both
        sent before either count is read: one round trip in a pipeline)."""
        updated = self.conn.execute(self.q.set_out_status, (status, jobid, dataid))
        released = self.conn.execute(self.q.drop_inputs, (jobid, dataid))
        return updated.rowcount, released.rowcount

    def set_out_status(self, jobid: str, dataid: str, status: str) -> int:
        return self.conn.execute(self.q.set_out_status, (status, jobid, dataid)).rowcount

    def put_out_status(
        self, jobid: str, dataid: str, datasetids: Sequence[str], status: str
    ) -> int:
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
        if not datasetids:
            return []
        sql = self.q.readers.format(marks=self.marks(len(datasetids)))
        return [row[0] for row in self.conn.execute(sql, (dataid, *datasetids))]

    def release_claim(
        self, jobid: str, dataid: str, runid: int, previous: Sequence[ChunkRow]
    ) -> None:
        self.conn.execute(self.q.delete_run, (runid,))
        self.conn.execute(self.q.drop_inputs, (jobid, dataid))
        kept = {row.datasetid: row for row in previous if row.locktype == "OUT"}
        for (datasetid,) in self.conn.execute(self.q.out_datasets, (jobid, dataid)).fetchall():
            if datasetid in kept:
                params = (kept[datasetid].status, jobid, dataid, datasetid)
                self.conn.execute(self.q.set_row_status, params)
            else:
                self.conn.execute(self.q.delete_row, (jobid, dataid, datasetid))
