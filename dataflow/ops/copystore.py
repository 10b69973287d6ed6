"""Moving a store: every table, history included, from one store to another (SQLite to
PostgreSQL and back), all or nothing."""

from __future__ import annotations

from ..errors import DataflowError
from ..store import Store
from ..store.base import TABLES


class TargetNotEmpty(DataflowError):
    def __init__(self, where: str, chunks: int, runs: int):
        super().__init__(
            f"{where} already holds {chunks} status rows and {runs} runs: copy-store would "
            "replace them; add --force to do so"
        )


def copy_store(source: Store, target: Store, where: str, force: bool = False) -> dict[str, int]:
    """Copy every table of ``source`` into ``target`` (created and at the current schema),
    replacing what it held, in one transaction of the target; rows copied per table."""
    copied = {}
    with source.transaction():  # one consistent picture of the source
        tables = {table: source.table_rows(table) for table in TABLES}
    with target.transaction():
        chunks, runs = len(target.table_rows("datastatus")), len(target.table_rows("run"))
        if (chunks or runs) and not force:
            raise TargetNotEmpty(where, chunks, runs)
        for table in ("job", "dataset", "datastatus", "run", "hold"):  # emptied first, jobs
            # first: no trigger then offers work from rows that are about to go
            target.replace_rows(table, ())
        for table, rows in tables.items():  # then filled; the triggers offer the work
            target.replace_rows(table, rows)
            copied[table] = len(rows)
    return copied
