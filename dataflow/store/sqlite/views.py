"""Store queries behind the read-only views: status, lineage, explain, purge.

Part of the SQLite backend (mixed into :class:`.store.SqliteStore`): SQL only.
"""

from __future__ import annotations

import sqlite3

from ..base import Row


class ViewQueries:
    conn: sqlite3.Connection

    def status_counts(self) -> list[Row]:
        """Chunks per registered job and OUT status."""
        sql = """
            SELECT jobid, status, COUNT(DISTINCT dataid) AS chunks FROM datastatus
            WHERE locktype = 'OUT' AND jobid IN (SELECT jobid FROM job)
            GROUP BY jobid, status"""
        return [dict(row) for row in self.conn.execute(sql)]

    def job_ids(self) -> list[str]:
        return [
            row[0]
            for row in self.conn.execute(
                "SELECT DISTINCT jobid FROM job WHERE jobid <> '*' ORDER BY 1"
            )
        ]

    def last_failure(self, jobid: str) -> Row | None:
        # newest failures first (index run_failures); one that a later run or an operator
        # has fixed is passed over
        row = self.conn.execute(
            """
            SELECT r.dataid, r.attempt, r.ended, r.reason FROM run r
            WHERE r.jobid = ?1 AND r.status = 'FAILED'
              AND r.runid = (SELECT MAX(runid) FROM run WHERE jobid = ?1 AND dataid = r.dataid)
              AND EXISTS (SELECT 1 FROM datastatus d WHERE d.jobid = ?1 AND d.dataid = r.dataid
                          AND d.locktype = 'OUT' AND d.status = 'FAILED')
            ORDER BY r.runid DESC LIMIT 1""",
            (jobid,),
        ).fetchone()
        return dict(row) if row else None

    def chunk_of_dataset(self, datasetid: str, dataid: str) -> list[Row]:
        """Every datastatus row of one dataset at one dataid (producers and consumers)."""
        # datastatus_by_chunk holds OUT rows only; a consumer's IN row is found through
        # the jobs that list the dataset as IN (only RunJob writes IN rows, for them)
        rows = self.conn.execute(
            """
            SELECT jobid, locktype, status, modified FROM datastatus
            WHERE datasetid = ?1 AND dataid = ?2 AND locktype = 'OUT'
            UNION ALL
            SELECT d.jobid, d.locktype, d.status, d.modified FROM job j JOIN datastatus d
              ON d.jobid = j.jobid AND d.dataid = ?2 AND d.datasetid = ?1
            WHERE j.datasetid = ?1 AND j.itemtype = 'IN' AND d.locktype = 'IN'
            ORDER BY 2 DESC, 1""",
            (datasetid, dataid),
        )
        return [dict(row) for row in rows]

    def jobs_using(self, datasetid: str, itemtype: str) -> list[str]:
        """Jobs that list the dataset as IN (consumers) or OUT (producers)."""
        rows = self.conn.execute(
            "SELECT DISTINCT jobid FROM job WHERE datasetid = ? AND itemtype = ? ORDER BY 1",
            (datasetid, itemtype),
        )
        return [row[0] for row in rows]

    def out_status(self, jobid: str, dataid: str) -> list[tuple[str, str]]:
        """(datasetid, status) of a job's OUT rows at a dataid."""
        rows = self.conn.execute(
            "SELECT datasetid, status FROM datastatus WHERE jobid = ? AND dataid = ? "
            "AND locktype = 'OUT' ORDER BY 1",
            (jobid, dataid),
        )
        return [tuple(row) for row in rows]

    def dataids_of_job(self, jobid: str, statuses: tuple[str, ...] = ()) -> list[str]:
        """The dataids at which a job has OUT rows (optionally only with these statuses)."""
        sql = "SELECT DISTINCT dataid FROM datastatus WHERE jobid = ? AND locktype = 'OUT'"
        params: list[str] = [jobid]
        if statuses:
            sql += f" AND status IN ({', '.join('?' * len(statuses))})"
            params += statuses
        return [row[0] for row in self.conn.execute(sql, params)]

    def waiting_upstream(self, datasetid: str) -> list[Row]:
        """Rows of a dataset that are not READY: chunks a consumer is waiting for."""
        rows = self.conn.execute(
            "SELECT dataid, jobid, status FROM datastatus WHERE datasetid = ? "
            "AND locktype = 'OUT' AND status <> 'READY'",
            (datasetid,),
        )
        return [dict(row) for row in rows]

    # -- purge -------------------------------------------------------------------------

    def purgeable_runs(self, jobid: str | None, before: str | None) -> list[Row]:
        """History rows that may go: ended, older than ``before``, and not the last run of a
        FAILED chunk (its retry count gates automatic reruns)."""
        sql = """
            SELECT r.runid, r.jobid, r.dataid, r.attempt, r.logpath, r.token FROM run r
            WHERE r.status <> 'RUNNING' AND (? IS NULL OR r.jobid = ?)
              AND (? IS NULL OR r.started < ?)
              AND NOT (r.status = 'FAILED' AND r.runid = (
                  SELECT MAX(runid) FROM run WHERE jobid = r.jobid AND dataid = r.dataid))
            ORDER BY r.runid"""
        return [dict(row) for row in self.conn.execute(sql, (jobid, jobid, before, before))]

    def delete_runs(self, runids: list[int]) -> int:
        self.conn.executemany("DELETE FROM run WHERE runid = ?", [(r,) for r in runids])
        return len(runids)
