"""Whole tables, as ``utility copy-store`` reads and replaces them, over every
backend's own named queries."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from ..columns import TABLES
from . import NamedQueries

TYPE_CHECKING = False  # typing's flag, without importing typing (a run's start)
if TYPE_CHECKING:
    from typing import Any


class TableQueries:
    conn: Any
    q: NamedQueries
    marks: Callable[[int], str]

    def table_rows(self, table: str) -> list[tuple]:
        """Every row of one of :data:`TABLES`, its columns in that order, in key order
        (job rows in the order they were registered)."""
        sql = getattr(self.q, f"rows_of_{table}").format(columns=", ".join(TABLES[table]))
        return [tuple(row) for row in self.conn.execute(sql)]

    def replace_rows(self, table: str, rows: Iterable[Sequence[object]]) -> None:
        """Replace every row of one of :data:`TABLES` (inside the caller's transaction)."""
        columns = TABLES[table]
        self.conn.execute(self.q.delete_rows.format(table=table))
        fields = {"table": table, "columns": ", ".join(columns), "marks": self.marks(len(columns))}
        self.conn.executemany(self.q.insert_row.format(**fields), rows)
