"""SQLite queries of the run history (table ``run``) and of the listings built on it.

Part of the SQLite backend (mixed into :class:`.store.SqliteStore`): SQL only.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from ..base import Row, zoned_now


class HistoryQueries:
    conn: sqlite3.Connection

    # -- run history -----------------------------------------------------------------

    def last_run(self, jobid: str, dataid: str) -> Row | None:
        row = self.conn.execute(
            "SELECT * FROM run WHERE jobid = ? AND dataid = ? ORDER BY attempt DESC LIMIT 1",
            (jobid, dataid),
        ).fetchone()
        return dict(row) if row else None

    def start_run(self, **run: object) -> int:
        """Insert a RUNNING history row; returns its runid."""
        columns = ", ".join(run)
        marks = ", ".join("?" * len(run))
        return self.conn.execute(
            f"INSERT INTO run(status, started, {columns}) VALUES ('RUNNING', ?, {marks})",
            (zoned_now(), *run.values()),
        ).lastrowid

    def end_run(self, runid: int, status: str, **outcome: object) -> bool:
        """Close a RUNNING history row; False if it was not RUNNING any more."""
        sets = "".join(f", {name} = ?" for name in outcome)
        return (
            self.conn.execute(
                f"UPDATE run SET status = ?, ended = ?{sets} WHERE runid = ? AND status = 'RUNNING'",
                (status, zoned_now(), *outcome.values(), runid),
            ).rowcount
            == 1
        )

    def abandon_runs(self, jobid: str, dataid: str, reason: str) -> None:
        """Close the RUNNING history rows of a chunk whose run died."""
        self.conn.execute(
            "UPDATE run SET status = 'FAILED', ended = ?, reason = ? "
            "WHERE jobid = ? AND dataid = ? AND status = 'RUNNING'",
            (zoned_now(), reason, jobid, dataid),
        )

    def note_runs(self, runids: Sequence[int], note: str) -> None:
        """Add ``note`` to the reason of these history rows, after what it says."""
        self.conn.executemany(
            "UPDATE run SET reason = CASE WHEN reason IS NULL OR reason = '' THEN ? "
            "ELSE reason || '; ' || ? END WHERE runid = ?",
            [(note, note, runid) for runid in runids],
        )

    def request_rerun(self, jobid: str, dataid: str, why: str) -> int:
        return self.conn.execute(
            "UPDATE run SET rerun = ? WHERE jobid = ? AND dataid = ? AND status = 'RUNNING'",
            (why, jobid, dataid),
        ).rowcount

    def rerun_request(self, runid: int) -> str | None:
        row = self.conn.execute("SELECT rerun FROM run WHERE runid = ?", (runid,)).fetchone()
        return row[0] if row else None

    def history(self, jobid: str | None, dataid: str | None, limit: int) -> list[Row]:
        """Run history, newest first, optionally for one job or one chunk."""
        where, params = [], []
        for column, value in (("jobid", jobid), ("dataid", dataid)):
            if value is not None:
                where.append(f"{column} = ?")
                params.append(value)
        sql = (
            "SELECT jobid, dataid, attempt, status, started, ended, duration, exitcode, signal, "
            "pid, host, command, logpath, reason FROM run"
            + (" WHERE " + " AND ".join(where) if where else "")
            + " ORDER BY runid DESC LIMIT ?"
        )
        return [dict(row) for row in self.conn.execute(sql, (*params, limit))]

    def run_log(self, jobid: str, dataid: str, attempt: int | None) -> Row | None:
        """The history row of one attempt (the last one when ``attempt`` is None)."""
        if attempt is None:
            return self.last_run(jobid, dataid)
        row = self.conn.execute(
            "SELECT * FROM run WHERE jobid = ? AND dataid = ? AND attempt = ?",
            (jobid, dataid, attempt),
        ).fetchone()
        return dict(row) if row else None

    # -- listings --------------------------------------------------------------------

    def runs(self, limit: int = 20) -> list[Row]:
        """The newest OUT rows, newest first."""
        sql = (
            "SELECT dataid, datasetid, jobid, locktype, modified, status FROM datastatus "
            "WHERE locktype = 'OUT' ORDER BY modified DESC LIMIT ?"
        )
        return [dict(row) for row in self.conn.execute(sql, (limit,))]

    def board(self, jobid: str | None = None) -> list[Row]:
        """Per registered job and dataid: the status of its OUT rows and its last run."""
        sql = """
            SELECT d.jobid, d.dataid, MIN(d.status) AS status, r.attempt, r.duration,
                   r.exitcode, r.signal, r.reason, r.started, r.ended, r.host, r.pid
            FROM datastatus d
            LEFT JOIN run r ON r.runid = (
                SELECT MAX(runid) FROM run WHERE jobid = d.jobid AND dataid = d.dataid)
            WHERE d.locktype = 'OUT' AND d.jobid IN (SELECT jobid FROM job)
              AND (? IS NULL OR d.jobid = ?)
            GROUP BY d.jobid, d.dataid"""
        return [dict(row) for row in self.conn.execute(sql, (jobid, jobid))]
