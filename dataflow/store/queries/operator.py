"""What an operator reads of any host from one place: each run's log as its host sends
it (table ``runlog``) and who did what by hand (table ``action``), over every backend's
own named queries."""

from __future__ import annotations

from ..columns import TABLES
from ..records import Row, zoned_now
from . import NamedQueries

TYPE_CHECKING = False  # typing's flag, without importing typing (a run's start)
if TYPE_CHECKING:
    from typing import Any


class OperatorQueries:
    conn: Any
    q: NamedQueries

    def put_log(self, runid: int, size: int, kept: int, body: bytes, done: bool) -> bool:
        """Keep the end of a run's log (``body``: its last ``kept`` of ``size`` bytes,
        compressed). While it runs (``done`` False) only a RUNNING run's log is written;
        once a log is done it is never written again. True if it was."""
        params = {"runid": runid, "size": size, "kept": kept, "body": body, "done": done}
        return self.conn.execute(self.q.put_log, params).rowcount == 1

    def run_output(self, runid: int) -> Row | None:
        """A run's log as kept in the store (size, kept, done, updated, body), or None."""
        row = self.conn.execute(self.q.run_output, (runid,)).fetchone()
        return dict(row) if row else None

    def add_action(self, **action: str | None) -> None:
        """Record an action taken by hand (host, who, client, action, jobid, dataid,
        detail) at the store's clock: this host's, with its UTC offset as the run
        history's times; a server's query takes its own instead (its column's default)."""
        params = {name: action[name] for name in TABLES["action"][2:]}
        self.conn.execute(self.q.add_action, {"acted": zoned_now(), **params})

    def actions(
        self, jobid: str | None = None, dataid: str | None = None, limit: int = 50
    ) -> list[Row]:
        """The newest ``limit`` actions, newest first, of a job or a chunk if given."""
        params = {"jobid": jobid, "dataid": dataid, "limit": limit}
        return [dict(row) for row in self.conn.execute(self.q.actions, params)]
