"""The read-only views (status, lineage, explain), as every backend runs them over its
own named queries."""

from __future__ import annotations

from collections.abc import Callable

from ..records import Row
from . import NamedQueries

TYPE_CHECKING = False  # typing's flag, without importing typing (a run's start)
if TYPE_CHECKING:
    from typing import Any


class ViewQueries:
    conn: Any
    q: NamedQueries
    marks: Callable[[int], str]

    def status_counts(self) -> list[Row]:
        """Chunks per registered job and OUT status."""
        return [dict(row) for row in self.conn.execute(self.q.status_counts)]

    def job_ids(self) -> list[str]:
        """Every registered job (not the store-wide pseudo-job ``*``)."""
        return [row[0] for row in self.conn.execute(self.q.job_ids)]

    def last_failure(self, jobid: str) -> Row | None:
        """The newest failed run whose chunk is still FAILED (fixed ones do not count)."""
        row = self.conn.execute(self.q.last_failure, {"jobid": jobid}).fetchone()
        return dict(row) if row else None

    def chunk_of_dataset(self, datasetid: str, dataid: str) -> list[Row]:
        """Every datastatus row of one dataset at one dataid (producers and consumers)."""
        params = {"datasetid": datasetid, "dataid": dataid}
        return [dict(row) for row in self.conn.execute(self.q.chunk_of_dataset, params)]

    def jobs_using(self, datasetid: str, itemtype: str) -> list[str]:
        """Jobs that list the dataset as IN (consumers) or OUT (producers)."""
        rows = self.conn.execute(self.q.jobs_using, (datasetid, itemtype))
        return [row[0] for row in rows]

    def out_status(self, jobid: str, dataid: str) -> list[tuple[str, str]]:
        """(datasetid, status) of a job's OUT rows at a dataid."""
        return [tuple(row) for row in self.conn.execute(self.q.out_status, (jobid, dataid))]

    def dataids_of_job(self, jobid: str, statuses: tuple[str, ...] = ()) -> list[str]:
        """The dataids at which a job has OUT rows (optionally only with these statuses)."""
        if not statuses:
            return [row[0] for row in self.conn.execute(self.q.dataids_of_job, (jobid,))]
        sql = self.q.dataids_of_job_in.format(marks=self.marks(len(statuses)))
        return [row[0] for row in self.conn.execute(sql, (jobid, *statuses))]

    def waiting_upstream(self, datasetid: str) -> list[Row]:
        """Rows of a dataset that are not READY: chunks a consumer is waiting for."""
        return [dict(row) for row in self.conn.execute(self.q.waiting_upstream, (datasetid,))]
