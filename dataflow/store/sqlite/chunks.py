"""SQLite queries of a chunk's claim and finish that PostgreSQL shares (its connection
speaks the same ``?`` placeholders): one place for this SQL, whichever store runs it.

Part of the SQLite backend (mixed into :class:`.store.SqliteStore`, and into
:class:`dataflow.store.postgres.store.PostgresStore`): SQL only.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from ..base import ChunkRow


class ChunkQueries:
    conn: sqlite3.Connection

    def drop_candidate(self, jobid: str, sortkey: str, dataid: str) -> None:
        self.conn.execute(
            "DELETE FROM candidate WHERE jobid = ? AND sortkey = ? AND dataid = ?",
            (jobid, sortkey, dataid),
        )

    def ready_inputs(self, datasetids: Sequence[str], dataid: str) -> int:
        """How many of these datasets have a READY output row at ``dataid``."""
        if not datasetids:
            return 0
        marks = ", ".join("?" * len(datasetids))
        sql = (
            "SELECT COUNT(DISTINCT datasetid) FROM datastatus WHERE datasetid IN "
            f"({marks}) AND dataid = ? AND locktype = 'OUT' AND status = 'READY'"
        )
        return self.conn.execute(sql, (*datasetids, dataid)).fetchone()[0]

    def chunk_rows(self, jobid: str, dataid: str) -> list[ChunkRow]:
        """The job's own datastatus rows (OUT and IN) at ``dataid``."""
        rows = self.conn.execute(
            "SELECT datasetid, locktype, status FROM datastatus WHERE jobid = ? AND dataid = ?",
            (jobid, dataid),
        )
        return [ChunkRow(*row) for row in rows]

    def mark_running(
        self, jobid: str, dataid: str, outputs: Sequence[str], inputs: Sequence[str]
    ) -> None:
        """Record a claim: OUT/RUNNING for each output, IN/RUNNING for each input."""
        upsert = (
            "INSERT INTO datastatus(datasetid, jobid, dataid, locktype, status, modified) "
            "VALUES (?, ?, ?, ?, 'RUNNING', now()) ON CONFLICT(datasetid, jobid, dataid) "
            "DO UPDATE SET locktype = excluded.locktype, status = 'RUNNING', modified = now()"
        )
        rows = [(d, jobid, dataid, "OUT") for d in outputs]
        rows += [(d, jobid, dataid, "IN") for d in inputs]
        self.conn.executemany(upsert, rows)  # the trigger retires the (job, dataid) candidate

    def finish(self, jobid: str, dataid: str, status: str) -> tuple[int, int]:
        """Set the job's OUT rows at ``dataid`` to ``status`` and release its IN rows."""
        updated = self.conn.execute(
            "UPDATE datastatus SET status = ?, modified = now() "
            "WHERE jobid = ? AND dataid = ? AND locktype = 'OUT'",
            (status, jobid, dataid),
        ).rowcount
        released = self.conn.execute(
            "DELETE FROM datastatus WHERE jobid = ? AND dataid = ? AND locktype = 'IN'",
            (jobid, dataid),
        ).rowcount
        return updated, released

    def delete_chunk(self, jobid: str, dataid: str) -> int:
        """Delete every datastatus row of the job at ``dataid``."""
        return self.conn.execute(
            "DELETE FROM datastatus WHERE jobid = ? AND dataid = ?", (jobid, dataid)
        ).rowcount

    def running(self, jobid: str | None = None) -> list[tuple[str, str]]:
        """(jobid, dataid) of every chunk whose OUT rows say RUNNING."""
        sql = "SELECT DISTINCT jobid, dataid FROM datastatus WHERE status = 'RUNNING' AND locktype = 'OUT'"
        if jobid is None:
            return [tuple(row) for row in self.conn.execute(sql)]
        return [tuple(row) for row in self.conn.execute(sql + " AND jobid = ?", (jobid,))]

    def count_running(self, jobid: str) -> int:
        """How many chunks of the job say RUNNING (live runs, once the dead are recovered)."""
        return self.conn.execute(
            "SELECT COUNT(DISTINCT dataid) FROM datastatus "
            "WHERE jobid = ? AND status = 'RUNNING' AND locktype = 'OUT'",
            (jobid,),
        ).fetchone()[0]

    def count_candidates(self, jobid: str) -> int:
        return self.conn.execute(
            "SELECT COUNT(*) FROM candidate WHERE jobid = ?", (jobid,)
        ).fetchone()[0]
