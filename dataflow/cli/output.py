"""Tables and JSON for the CLIs. The only module that imports ``tabulate``."""

from __future__ import annotations

from collections.abc import Sequence

from . import Lines, printable


def plural(number: int, noun: str) -> str:
    """``1 row``, ``2 rows``: a count as a person would write it."""
    return f"{number:,} {noun}{'' if number == 1 else 's'}"


def table(columns: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """The seed's look: upper-case header, a dashed line, aligned columns; a value's
    control characters escaped, so that a row is one line whatever the store holds."""
    from tabulate import tabulate  # costly to import; only listings need it

    return tabulate(
        [["" if v is None else printable(v) for v in row] for row in rows],
        headers=[printable(c).upper() for c in columns],
        tablefmt="simple",
        disable_numparse=True,  # keep dataids such as 1.0 exactly as stored
    )


def as_json(columns: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    import json  # (only --json: not on RunJob's path)

    return json.dumps([dict(zip(columns, row, strict=True)) for row in rows], indent=2, default=str)


def listing(columns: Sequence[str], rows: Sequence[Sequence[object]], json_output: bool) -> str:
    """A table or JSON: :class:`Lines`, which ``say`` prints line by line."""
    if json_output:
        return Lines(as_json(columns, rows))
    if not rows:
        return "no rows returned by the query"
    return Lines(table(columns, rows))


def records(rows: Sequence[dict], json_output: bool) -> str:
    """A listing of dict rows that all share the same keys."""
    columns = list(rows[0]) if rows else []
    return listing(columns, [list(row.values()) for row in rows], json_output)
