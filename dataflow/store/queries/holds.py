"""A chunk's hold and release: each output's status kept in table hold while the chunk
is frozen, over every backend's own named queries."""

from __future__ import annotations

from collections.abc import Sequence

from ...dataids import check_name
from ..records import Row
from . import NamedQueries

TYPE_CHECKING = False  # typing's flag, without importing typing (a run's start)
if TYPE_CHECKING:
    from typing import Any


class HoldQueries:
    conn: Any
    q: NamedQueries

    def held(self, jobid: str, dataid: str) -> list[Row]:
        """A held chunk's outputs: ``datasetid``, its ``previous`` status, held ``since``."""
        return [dict(row) for row in self.conn.execute(self.q.held, (jobid, dataid))]

    def hold_chunk(
        self, jobid: str, dataid: str, previous: Sequence[tuple[str, str | None]]
    ) -> None:
        """Freeze a chunk: remember each output's previous status, set it to HOLD."""
        check_name("dataid", dataid)
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
