"""Cells of a table for a person: a long text (a Spark exception's message, a stack)
as its first line, cut to a width; ``--json`` keeps the whole text."""

from __future__ import annotations

WIDTH = 100  # characters of a cut cell, "..." included


def first_line(text: object, width: int = WIDTH) -> object:
    """The first non-blank line of ``text``, at most ``width`` characters; ``...`` ends it
    when more was there (another line, or the rest of a long one). Not text: as it is."""
    if not isinstance(text, str):
        return text
    lines = [line.strip() for line in text.strip().splitlines()]
    line = lines[0] if lines else ""
    if len(line) > width:
        return line[: width - 3].rstrip() + "..."
    return f"{line} ..." if len(lines) > 1 else line


def cut(rows: list[dict], *columns: str) -> list[dict]:
    """The rows with ``columns`` cut to their first line (in place)."""
    for row in rows:
        for column in columns:
            if column in row:
                row[column] = first_line(row[column])
    return rows
