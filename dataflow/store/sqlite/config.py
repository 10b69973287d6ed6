"""Store queries behind registration, export/import, rekey, hold/release, and the
claims a live reader delays or a job that never started gives back.

Part of the SQLite backend (mixed into :class:`.store.SqliteStore`): SQL only.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Sequence

from ..base import DATASET_COLUMNS, TABLES, ChunkRow, Row


class ConfigQueries:
    conn: sqlite3.Connection
    INSERTION = "rowid"  # the column that orders a table's rows as they were inserted

    # -- whole tables --------------------------------------------------------------------

    def table_rows(self, table: str) -> list[tuple]:
        columns = TABLES[table]
        order = {"job": f"jobid, {self.INSERTION}", "run": "runid"}.get(table, "1, 2, 3")
        sql = f"SELECT {', '.join(columns)} FROM {table} ORDER BY {order}"
        return [tuple(row) for row in self.conn.execute(sql)]

    def replace_rows(self, table: str, rows: Iterable[Sequence[object]]) -> None:
        columns = TABLES[table]
        self.conn.execute(f"DELETE FROM {table}")
        self.conn.executemany(
            f"INSERT INTO {table}({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})",
            rows,
        )

    def put_dataset(self, row: Row) -> None:
        """Insert or replace a dataset row."""
        values = tuple(row.get(column) for column in DATASET_COLUMNS)
        self.conn.execute(
            f"INSERT OR REPLACE INTO dataset({', '.join(DATASET_COLUMNS)}) "
            f"VALUES ({', '.join('?' * len(DATASET_COLUMNS))})",
            values,
        )

    def delete_dataset(self, datasetid: str) -> int:
        return self.conn.execute("DELETE FROM dataset WHERE datasetid = ?", (datasetid,)).rowcount

    def put_job(self, jobid: str, items: Iterable[tuple[str, str | None, str | None]]) -> None:
        """Replace a job's rows with (itemtype, datasetid, itemvalue) items."""
        self.delete_job(jobid)
        self.conn.executemany(
            "INSERT INTO job(jobid, itemtype, datasetid, itemvalue, modified) VALUES (?, ?, ?, ?, now())",
            [(jobid, *item) for item in items],
        )

    def delete_job(self, jobid: str) -> int:
        return self.conn.execute("DELETE FROM job WHERE jobid = ?", (jobid,)).rowcount

    def jobs(self) -> list[Row]:
        sql = "SELECT jobid, itemtype, datasetid, itemvalue, modified FROM job ORDER BY jobid, "
        return [dict(row) for row in self.conn.execute(sql + self.INSERTION)]

    def job_rows(self) -> list[Row]:
        rows = self.conn.execute(
            "SELECT jobid, itemtype, datasetid, itemvalue FROM job WHERE jobid <> '*' "
            f"ORDER BY jobid, {self.INSERTION}"
        )
        return [dict(row) for row in rows]

    def passwords(self) -> list[tuple[str, str]]:
        """(datasetid, encryptedpass) of every dataset with a stored password."""
        rows = self.conn.execute(
            "SELECT datasetid, encryptedpass FROM dataset "
            "WHERE encryptedpass IS NOT NULL AND encryptedpass <> '' ORDER BY 1"
        )
        return [tuple(row) for row in rows]

    def set_password(self, datasetid: str, token: str) -> None:
        self.conn.execute(
            "UPDATE dataset SET encryptedpass = ? WHERE datasetid = ?", (token, datasetid)
        )

    # -- hold / release --------------------------------------------------------------------

    def held(self, jobid: str, dataid: str) -> list[Row]:
        rows = self.conn.execute(
            "SELECT datasetid, previous, since FROM hold WHERE jobid = ? AND dataid = ?",
            (jobid, dataid),
        )
        return [dict(row) for row in rows]

    def hold_chunk(
        self, jobid: str, dataid: str, previous: Sequence[tuple[str, str | None]]
    ) -> None:
        """Freeze a chunk: remember each output's previous status, set it to HOLD."""
        for datasetid, status in previous:
            self.conn.execute(
                "INSERT INTO hold(jobid, dataid, datasetid, previous, since) VALUES (?, ?, ?, ?, now())",
                (jobid, dataid, datasetid, status),
            )
            self.conn.execute(
                "INSERT INTO datastatus(datasetid, jobid, dataid, locktype, status, modified) "
                "VALUES (?, ?, ?, 'OUT', 'HOLD', now()) ON CONFLICT(datasetid, jobid, dataid) "
                "DO UPDATE SET status = 'HOLD', modified = now()",
                (datasetid, jobid, dataid),
            )

    def release_chunk(self, jobid: str, dataid: str) -> list[tuple[str, str | None]]:
        """Unfreeze a chunk: restore (or delete) each output row; returns what was restored."""
        restored = []
        for row in self.held(jobid, dataid):
            datasetid, previous = row["datasetid"], row["previous"]
            if previous is None:
                self.conn.execute(
                    "DELETE FROM datastatus WHERE datasetid = ? AND jobid = ? AND dataid = ?",
                    (datasetid, jobid, dataid),
                )
            else:
                self.conn.execute(
                    "UPDATE datastatus SET status = ?, modified = now() "
                    "WHERE datasetid = ? AND jobid = ? AND dataid = ?",
                    (previous, datasetid, jobid, dataid),
                )
            restored.append((datasetid, previous))
        self.conn.execute("DELETE FROM hold WHERE jobid = ? AND dataid = ?", (jobid, dataid))
        return restored

    def put_out_status(
        self, jobid: str, dataid: str, datasetids: Sequence[str], status: str
    ) -> int:
        changed = 0
        for datasetid in datasetids:
            changed += self.conn.execute(
                "INSERT INTO datastatus(datasetid, jobid, dataid, locktype, status, modified) "
                "VALUES (?, ?, ?, 'OUT', ?, now()) ON CONFLICT(datasetid, jobid, dataid) "
                "DO UPDATE SET locktype = 'OUT', status = excluded.status, modified = now() "
                "WHERE status IS NOT excluded.status OR locktype IS NOT 'OUT'",
                (datasetid, jobid, dataid, status),
            ).rowcount
        return changed

    def set_out_status(self, jobid: str, dataid: str, status: str) -> int:
        return self.conn.execute(
            "UPDATE datastatus SET status = ?, modified = now() "
            "WHERE jobid = ? AND dataid = ? AND locktype = 'OUT'",
            (status, jobid, dataid),
        ).rowcount

    # -- claims that are taken back ------------------------------------------------------

    def readers(self, datasetids: Sequence[str], dataid: str) -> list[str]:
        if not datasetids:
            return []
        marks = ", ".join("?" * len(datasetids))
        # IN rows are written only for a job's registered IN datasets: seek them per job
        rows = self.conn.execute(
            f"SELECT DISTINCT d.jobid FROM job j JOIN datastatus d ON d.jobid = j.jobid "
            f"AND d.dataid = ? AND d.datasetid = j.datasetid WHERE j.datasetid IN ({marks}) "
            "AND j.itemtype = 'IN' AND d.locktype = 'IN'",
            (dataid, *datasetids),
        )
        return [row[0] for row in rows]

    def release_claim(
        self, jobid: str, dataid: str, runid: int, previous: Sequence[ChunkRow]
    ) -> None:
        self.conn.execute("DELETE FROM run WHERE runid = ?", (runid,))
        self.conn.execute(
            "DELETE FROM datastatus WHERE jobid = ? AND dataid = ? AND locktype = 'IN'",
            (jobid, dataid),
        )
        kept = {row.datasetid: row for row in previous if row.locktype == "OUT"}
        for (datasetid,) in self.conn.execute(
            "SELECT datasetid FROM datastatus WHERE jobid = ? AND dataid = ? AND locktype = 'OUT'",
            (jobid, dataid),
        ).fetchall():
            if datasetid in kept:
                self.conn.execute(
                    "UPDATE datastatus SET status = ?, modified = now() "
                    "WHERE jobid = ? AND dataid = ? AND datasetid = ?",
                    (kept[datasetid].status, jobid, dataid, datasetid),
                )
            else:
                self.conn.execute(
                    "DELETE FROM datastatus WHERE jobid = ? AND dataid = ? AND datasetid = ?",
                    (jobid, dataid, datasetid),
                )
