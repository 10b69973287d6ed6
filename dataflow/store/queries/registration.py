"""Registration (tables dataset and job) and stored passwords, as every backend runs
them over its own named queries."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from ...dataids import check_name
from ..columns import DATASET_COLUMNS
from ..records import JobItem, Row
from . import NamedQueries

TYPE_CHECKING = False  # typing's flag, without importing typing (a run's start)
if TYPE_CHECKING:
    from typing import Any


class RegistrationQueries:
    conn: Any
    q: NamedQueries
    marks: Callable[[int], str]

    def job_items(self, jobid: str) -> list[JobItem]:
        """A job's rows of table ``job``, in the order they were registered."""
        return [JobItem(*row) for row in self.conn.execute(self.q.job_items, (jobid,))]

    def datasets(self, ids: Iterable[str] | None = None) -> dict[str, Row]:
        """Dataset rows by datasetid: the given ones, or all."""
        if ids is None:
            rows = self.conn.execute(self.q.datasets)
        else:
            params = tuple(ids)
            if not params:
                return {}
            sql = self.q.datasets_of.format(marks=self.marks(len(params)))
            rows = self.conn.execute(sql, params)
        return {row["datasetid"]: dict(row) for row in rows}

    def put_dataset(self, row: Row) -> None:
        """Insert or replace a dataset row."""
        check_name("dataset name", str(row.get("datasetid") or ""))
        values = tuple(row.get(column) for column in DATASET_COLUMNS)
        self.conn.execute(self.q.put_dataset, values)

    def delete_dataset(self, datasetid: str) -> int:
        """Delete a dataset row; rows deleted."""
        return self.conn.execute(self.q.delete_dataset, (datasetid,)).rowcount

    def put_job(self, jobid: str, items: Iterable[tuple[str, str | None, str | None]]) -> None:
        """Replace a job's rows with (itemtype, datasetid, itemvalue) items."""
        items = list(items)
        check_name("job name", jobid)
        for _, datasetid, _ in items:
            check_name("dataset name", datasetid or "")
        self.delete_job(jobid)
        self.conn.executemany(self.q.put_job_item, [(jobid, *item) for item in items])

    def delete_job(self, jobid: str) -> int:
        """Delete a job's rows of table ``job``; rows deleted."""
        return self.conn.execute(self.q.delete_job, (jobid,)).rowcount

    def jobs(self) -> list[Row]:
        """Every row of table ``job``, by jobid."""
        return [dict(row) for row in self.conn.execute(self.q.jobs)]

    def job_rows(self) -> list[Row]:
        """Every job's rows of table ``job`` without its timestamp (for export); here and
        in ``job_ids`` not those of the store-wide pseudo-job ``*`` (its settings)."""
        return [dict(row) for row in self.conn.execute(self.q.job_rows)]

    def passwords(self) -> list[tuple[str, str]]:
        """(datasetid, encryptedpass) of every dataset with a stored password."""
        return [tuple(row) for row in self.conn.execute(self.q.passwords)]

    def set_password(self, datasetid: str, token: str) -> None:
        """Store a dataset's encrypted password (``token``)."""
        self.conn.execute(self.q.set_password, (token, datasetid))
