"""The SQLite backend: one file in WAL mode, its schema and migrations, all its SQL.

May import: store.base, store.connector, store.migrations, store.queries, errors, dataids.
"""

from .store import SqliteStore

__all__ = ["SqliteStore"]
