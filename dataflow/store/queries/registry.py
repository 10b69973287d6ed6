"""Registration (tables dataset and job), whole tables for copy-store, and hold/release,
as every backend runs them over its own named queries."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from ..base import DATASET_COLUMNS, TABLES, JobItem, Row
from . import NamedQueries


class RegistryQueries:
    conn: Any
    q: NamedQueries
    marks: Callable[[int], str]

    def job_items(self, jobid: str) -> list[JobItem]:
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
        values = tuple(row.get(column) for column in DATASET_COLUMNS)
        self.conn.execute(self.q.put_dataset, values)

    def delete_dataset(self, datasetid: str) -> int:
        return self.conn.execute(self.q.delete_dataset, (datasetid,)).rowcount

    def put_job(self, jobid: str, items: Iterable[tuple[str, str | None, str | None]]) -> None:
        """Replace a job's rows with (itemtype, datasetid, itemvalue) items."""
        self.delete_job(jobid)
        self.conn.executemany(self.q.put_job_item, [(jobid, *item) for item in items])

    def delete_job(self, jobid: str) -> int:
        return self.conn.execute(self.q.delete_job, (jobid,)).rowcount

    def jobs(self) -> list[Row]:
        return [dict(row) for row in self.conn.execute(self.q.jobs)]

    def job_rows(self) -> list[Row]:
        return [dict(row) for row in self.conn.execute(self.q.job_rows)]

    def passwords(self) -> list[tuple[str, str]]:
        """(datasetid, encryptedpass) of every dataset with a stored password."""
        return [tuple(row) for row in self.conn.execute(self.q.passwords)]

    def set_password(self, datasetid: str, token: str) -> None:
        self.conn.execute(self.q.set_password, (token, datasetid))

    # -- whole tables --------------------------------------------------------------------

    def table_rows(self, table: str) -> list[tuple]:
        sql = getattr(self.q, f"rows_of_{table}").format(columns=", ".join(TABLES[table]))
        return [tuple(row) for row in self.conn.execute(sql)]

    def replace_rows(self, table: str, rows: Iterable[Sequence[object]]) -> None:
        columns = TABLES[table]
        self.conn.execute(self.q.delete_rows.format(table=table))
        fields = {"table": table, "columns": ", ".join(columns), "marks": self.marks(len(columns))}
        self.conn.executemany(self.q.insert_row.format(**fields), rows)

    # -- hold / release --------------------------------------------------------------------

    def held(self, jobid: str, dataid: str) -> list[Row]:
        return [dict(row) for row in self.conn.execute(self.q.held, (jobid, dataid))]

    def hold_chunk(
        self, jobid: str, dataid: str, previous: Sequence[tuple[str, str | None]]
    ) -> None:
        """Freeze a chunk: remember each output's previous status, set it to HOLD."""
        for datasetid, status in previous:
            self.conn.execute(self.q.hold, (jobid, dataid, datasetid, status))
            self.conn.execute(self.q.hold_output, (datasetid, jobid, dataid))

    def release_chunk(self, jobid: str, dataid: str) -> list[tuple[str, str | None]]:
        """Unfreeze a chunk: restore (or delete) each output row; returns what was restored."""
        restored = []
        for row in self.held(jobid, dataid):
            datasetid, previous = row["datasetid"], row["previous"]
            if previous is None:
                self.conn.execute(self.q.delete_row, (jobid, dataid, datasetid))
            else:
                self.conn.execute(self.q.set_row_status, (previous, jobid, dataid, datasetid))
            restored.append((datasetid, previous))
        self.conn.execute(self.q.unhold, (jobid, dataid))
        return restored
