"""The run history (table ``run``) and the views built on it, as every backend runs them
over its own named queries."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ..records import Row, zoned_now
from . import NamedQueries

TYPE_CHECKING = False  # typing's flag, without importing typing (a run's start)
if TYPE_CHECKING:
    from typing import Any


class HistoryQueries:
    conn: Any
    q: NamedQueries
    marks: Callable[[int], str]

    # -- run history -----------------------------------------------------------------

    def last_run(self, jobid: str, dataid: str) -> Row | None:
        """The chunk's last run (its history row of the highest attempt), or None."""
        row = self.conn.execute(self.q.last_run, (jobid, dataid)).fetchone()
        return dict(row) if row else None

    def start_run(self, **run: object) -> int:
        """Insert a RUNNING history row (these columns, started now at this host's clock);
        returns its runid."""
        sql = self.q.start_run.format(columns=", ".join(run), marks=self.marks(len(run)))
        return self.inserted_id(sql, (zoned_now(), *run.values()))

    def start_runs(self, runs: Sequence[dict[str, object]]) -> list[int]:
        """:meth:`start_run` of each (a store may send them all before reading any)."""
        return [self.start_run(**run) for run in runs]

    def end_run(self, runid: int, status: str, **outcome: object) -> tuple[bool, str | None]:
        """Close a RUNNING history row: its status, end time and how it ended. False if
        it was not RUNNING any more (recovered, or ended by hand): fenced off. Also the
        rerun asked of the run while it ran (:meth:`request_rerun`), if any, read first (a
        store whose UPDATE returns it reads it there)."""
        row = self.conn.execute(self.q.rerun_request, (runid,)).fetchone()
        ended = self.conn.execute(*self._ending(runid, status, outcome)).rowcount == 1
        return ended, row[0] if row else None

    def _ending(self, runid: int, status: str, outcome: dict) -> tuple[str, tuple]:
        """The UPDATE that closes a RUNNING history row, and its parameters."""
        sets = "".join(f", {name} = {self.marks(1)}" for name in outcome)
        return self.q.end_run.format(sets=sets), (status, zoned_now(), *outcome.values(), runid)

    def abandon_runs(self, jobid: str, dataid: str, reason: str) -> None:
        """Close the RUNNING history rows of a chunk whose run died."""
        self.conn.execute(self.q.abandon_runs, (zoned_now(), reason, jobid, dataid))

    def note_runs(self, runids: Sequence[int], note: str) -> None:
        """Add ``note`` to the reason of these history rows, after what it says."""
        self.conn.executemany(self.q.note_run, [(note, note, runid) for runid in runids])

    def request_rerun(self, jobid: str, dataid: str, why: str) -> int:
        """Ask the chunk's live run to end in RESUBMIT instead of READY; runs marked."""
        return self.conn.execute(self.q.request_rerun, (why, jobid, dataid)).rowcount

    def run_log(self, jobid: str, dataid: str, attempt: int | None) -> Row | None:
        """The history row of one attempt (the last one when ``attempt`` is None)."""
        if attempt is None:
            return self.last_run(jobid, dataid)
        row = self.conn.execute(self.q.run_attempt, (jobid, dataid, attempt)).fetchone()
        return dict(row) if row else None

    def history(self, jobid: str | None, dataid: str | None, limit: int) -> list[Row]:
        """Run history, newest first, optionally for one job or one chunk (a query each:
        each uses its own index)."""
        given = tuple(value for value in (jobid, dataid) if value is not None)
        if jobid is not None and dataid is not None:
            sql = self.q.history_of_chunk
        elif jobid is not None:
            sql = self.q.history_of_job
        elif dataid is not None:
            sql = self.q.history_of_dataid
        else:
            sql = self.q.history
        return [dict(row) for row in self.conn.execute(sql, (*given, limit))]

    def purgeable_runs(self, jobid: str | None, before: str | None) -> list[Row]:
        """History rows that may go: ended, older than ``before``, and not the last run of a
        FAILED chunk (its retry count gates automatic reruns)."""
        params = {"jobid": jobid, "before": before}
        return [dict(row) for row in self.conn.execute(self.q.purgeable_runs, params)]

    def delete_runs(self, runids: list[int]) -> int:
        """Delete these history rows; how many were asked for."""
        self.conn.executemany(self.q.delete_run, [(r,) for r in runids])
        return len(runids)

    # -- listings --------------------------------------------------------------------

    def runs(self, limit: int = 20) -> list[Row]:
        """The newest OUT rows, newest first."""
        return [dict(row) for row in self.conn.execute(self.q.runs, (limit,))]

    def board(self, jobid: str | None = None) -> list[Row]:
        """Per registered job and dataid: the status of its OUT rows and its last run."""
        return [dict(row) for row in self.conn.execute(self.q.board, {"jobid": jobid})]

    def newest_dataids(self, jobid: str, limit: int) -> tuple[list[str], list[str]]:
        """Dataids of a job's OUT rows (one per row): the newest ``limit`` in natural
        order, read from the end of an index; and every one whose order only Python knows
        (:func:`dataflow.dataids.natural_key`), which the index does not place."""
        params = {"jobid": jobid, "limit": limit}
        newest = [row[0] for row in self.conn.execute(self.q.board_newest, params)]
        unkeyed = [row[0] for row in self.conn.execute(self.q.board_unkeyed, params)]
        return newest, unkeyed

    def board_at(self, dataids: Sequence[str]) -> list[Row]:
        """As :meth:`board`, at these dataids only."""
        import json  # (only here: not on RunJob's path, ~1.5 ms to import)

        params = {"dataids": json.dumps(list(dataids))}
        return [dict(row) for row in self.conn.execute(self.q.board_at, params)]
