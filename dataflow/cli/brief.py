"""Cells of a table for a person: a long text (a Spark exception's message, a stack)
as its first line, cut to a width; ``--json`` keeps the whole text."""

from __future__ import annotations

from ..ops.status import first_line


def cut(rows: list[dict], *columns: str) -> list[dict]:
    """The rows with ``columns`` cut to their first line (in place)."""
    for row in rows:
        for column in columns:
            if column in row:
                row[column] = first_line(row[column])
    return rows
