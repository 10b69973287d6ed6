"""Where the SQLite store is opened from (read-write, or read-only even from a read-only
folder), and the guard that keeps ``utility sql`` read-only.

Part of the SQLite backend: :mod:`.connection` opens its connections through :func:`uri`
and :func:`read_only_uri`.
"""

from __future__ import annotations

import os
import sqlite3

# Pragmas that only read, whatever their argument (a table or index name).
READING_PRAGMAS = frozenset(
    {"table_info", "table_xinfo", "index_list", "index_info", "index_xinfo"}
    | {"foreign_key_list", "integrity_check", "quick_check", "database_list", "table_list"}
    | {"function_list", "pragma_list", "compile_options", "collation_list", "module_list"}
)
# Pragmas that read without a value and change the store with one (journal_mode=delete
# would take the store out of WAL for good).
SETTING_PRAGMAS = frozenset(
    {"journal_mode", "user_version", "schema_version", "page_count", "page_size"}
    | {"freelist_count", "encoding", "application_id", "data_version"}
)


def folder(path: str) -> str:
    """The folder of the store's file ``path`` (of a relative name too: ".")."""
    return os.path.dirname(path) or "."


def uri(path: str, mode: str) -> str:
    """The URI that opens ``path`` in ``mode`` (rw, rwc or ro)."""
    # "%", "?" and "#" are the characters a URI path must escape
    escaped = path.replace("%", "%25").replace("?", "%3f").replace("#", "%23")
    return f"file:{escaped}?mode={mode}"


def writable(path: str) -> bool:
    """Can SQLite write the store here (its file, and its folder for the -wal and -shm)?"""
    return os.access(path, os.W_OK) and os.access(folder(path), os.W_OK)


def read_only_uri(path: str) -> str:
    """A read-only URI. In a folder we cannot write, SQLite cannot create the -shm file a
    WAL store needs: when no -wal file holds changes, every committed row is in the file
    itself and nobody can write one (a writer needs that folder too), so the file is read
    as immutable; otherwise SQLite reads it through the existing -wal and -shm files."""
    if os.access(folder(path), os.W_OK) or _size(path + "-wal"):
        return uri(path, "ro")
    return uri(path, "ro") + "&immutable=1"


def _size(path: str) -> int:
    try:
        return os.stat(path).st_size
    except OSError:
        return 0


class ReadGuard:
    """An authorizer that refuses what query_only lets through: ATTACH and DETACH (and so
    VACUUM INTO, which attaches its target), and every pragma that may change something.
    ``refused`` says what it refused last."""

    def __init__(self) -> None:
        self.refused: str | None = None

    def __call__(self, action: int, arg1: str | None, arg2: str | None, *_: object) -> int:
        if action == sqlite3.SQLITE_ATTACH:  # a plain VACUUM attaches '' (a temporary file)
            self.refused = f"ATTACH of '{arg1}'" if arg1 else None
            return sqlite3.SQLITE_DENY
        if action == sqlite3.SQLITE_DETACH:
            self.refused = "DETACH"
            return sqlite3.SQLITE_DENY
        if action == sqlite3.SQLITE_PRAGMA:
            name = (arg1 or "").lower()
            if name in READING_PRAGMAS or (name in SETTING_PRAGMAS and arg2 is None):
                return sqlite3.SQLITE_OK
            self.refused = f"PRAGMA {name}" + (f" = {arg2}" if arg2 is not None else "")
            return sqlite3.SQLITE_DENY
        return sqlite3.SQLITE_OK
