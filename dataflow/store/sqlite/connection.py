"""The SQLite connector: how a connection is opened (busy timeout, durability, our SQL
functions, text that may not be UTF-8), its transactions, its placeholders, what a driver
error means to a user, and how a migration script is split into statements. The queries
it runs are the backend's named ones (``queries/*.sql``): this module moves them.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager

from ...dataids import natural_key
from ...errors import NotAStore, StoreMissing, StoreUnavailable
from ..base import DRIVER_ERRORS, busy_timeout, now
from . import access

DRIVER_ERRORS.append(sqlite3.Error)


def _text(data: bytes) -> str:
    """Text as stored. An outside client may have written bytes that are not UTF-8: they
    are kept as surrogate escapes (readable, and refused as a chunk name) instead of
    failing every query that reads the row."""
    return data.decode("utf-8", "surrogateescape")


def as_stored(text: str) -> str | bytes:
    """A text as read back by :func:`_text`, bound as the bytes it was (cast to TEXT)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogateescape")
    return text


class Connection:
    """An open SQLite connection. Transactions are ours (``isolation_level=None``)."""

    def __init__(self, raw: sqlite3.Connection):
        self.raw = raw

    def execute(
        self, sql: str, params: Sequence[object] | Mapping[str, object] = ()
    ) -> sqlite3.Cursor:
        return self.raw.execute(sql, params)

    def executemany(self, sql: str, rows: Iterable[Sequence[object]]) -> sqlite3.Cursor:
        return self.raw.executemany(sql, rows)

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """A write transaction taken up front (``BEGIN IMMEDIATE``): two claimers never
        read the same free chunk."""
        self.raw.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            if self.raw.in_transaction:
                self.raw.execute("ROLLBACK")
            raise
        else:
            self.raw.execute("COMMIT")

    def close(self) -> None:
        self.raw.close()

    @property
    def total_changes(self) -> int:
        """Rows changed since the connection opened (ours, triggers' and users')."""
        return self.raw.total_changes


def marks(count: int) -> str:
    """``count`` placeholders of this driver, comma separated."""
    return ", ".join("?" * count)


def connect(path: str, mode: str) -> Connection:
    """A connection in ``mode``: rwc (create), rw, or ro (nothing it runs changes the store)."""
    address = access.read_only_uri(path) if mode == "ro" else access.uri(path, mode)
    conn = None
    try:
        # isolation_level=None: we issue BEGIN IMMEDIATE ourselves; Python's implicit
        # deferred transactions would let two processes read the same free chunk.
        wait = busy_timeout()
        conn = sqlite3.connect(address, uri=True, isolation_level=None, timeout=wait)
        conn.execute(f"PRAGMA busy_timeout = {int(wait * 1000)}")
        conn.execute("PRAGMA query_only = ON" if mode == "ro" else "PRAGMA synchronous = FULL")
        conn.execute("PRAGMA temp_store = MEMORY")  # measured: bulk trigger work 0.3-0.7x
    except sqlite3.Error as exc:
        if conn is not None:
            conn.close()
        if not os.path.exists(path) and mode == "rwc":
            raise create_failure(path, exc) from None
        if not os.path.exists(path):
            raise StoreMissing(path) from None
        raise open_failure(path, exc, reading=mode == "ro") from None
    conn.row_factory = sqlite3.Row
    conn.text_factory = _text
    conn.create_function("now", 0, now)
    conn.create_function("dataflow_natkey", 1, natural_key, deterministic=True)
    return Connection(conn)


def statements(script: str) -> Iterator[str]:
    """Split a migration script into complete statements (triggers contain ';')."""
    pending = ""
    for line in script.splitlines(keepends=True):
        if line.lstrip().startswith("--"):
            continue
        pending += line
        if sqlite3.complete_statement(pending):
            yield pending.strip()
            pending = ""
    if pending.strip():
        raise ValueError(f"incomplete statement in migration: {pending[:60]}")


# -- what a driver error means -----------------------------------------------------------


def passing(exc: BaseException) -> bool:
    """Busy or locked: another writer holds the store; it will let go."""
    name = getattr(exc, "sqlite_errorname", "") or ""
    return name.startswith(("SQLITE_BUSY", "SQLITE_LOCKED"))


def failure(path: str, exc: sqlite3.Error) -> StoreUnavailable | NotAStore | None:
    """What a driver error says about the store itself (disk full, I/O error, read-only,
    damaged), or None when it is about the statement."""
    name = getattr(exc, "sqlite_errorname", None) or ""
    if name.startswith("SQLITE_BUSY"):
        reason = "another process has held it locked for longer than the busy timeout"
        why = f"{reason} (DATAFLOW_BUSY_TIMEOUT, default 60 s)"
        return StoreUnavailable("write", path, why, passing=True)
    if name == "SQLITE_FULL":
        return StoreUnavailable("write", path, "the disk is full")
    if name.startswith("SQLITE_IOERR"):
        return StoreUnavailable("read or write", path, f"disk full or I/O error ({name})")
    if name.startswith("SQLITE_READONLY"):
        return StoreUnavailable("write", path, "it is read-only (its file, folder or disk)")
    if name.startswith(("SQLITE_CORRUPT", "SQLITE_NOTADB")):
        return NotAStore(path, str(exc))
    return None


def create_failure(path: str, exc: sqlite3.Error) -> StoreUnavailable | NotAStore:
    """Why a new store could not be created: mostly a folder that cannot be written."""
    folder = access.folder(path)
    if not os.access(folder, os.W_OK):
        why = f"its folder {folder} cannot be written (permissions, or a read-only disk)"
        return StoreUnavailable("create", path, why)
    return failure(path, exc) or StoreUnavailable("create", path, str(exc))


def open_failure(path: str, exc: sqlite3.Error, reading: bool) -> StoreUnavailable | NotAStore:
    """Why the store could not be opened (``reading``: for a read-only command)."""
    name = getattr(exc, "sqlite_errorname", None) or ""
    if not name.startswith("SQLITE_CANTOPEN"):
        return failure(path, exc) or NotAStore(path, str(exc))
    if os.path.isdir(path):
        return NotAStore(path, "it is a folder")
    if not os.access(path, os.R_OK):
        return StoreUnavailable("open", path, "permission denied")
    folder = access.folder(path)
    if os.access(folder, os.W_OK):
        return StoreUnavailable("open", path, str(exc))
    if reading:  # read_only_uri kept the -wal file: it holds changes, but no -shm is beside it
        why = "its folder is read-only and its -wal file needs a -shm file that is not there"
        return StoreUnavailable("read", path, why + "; copy the store to a writable folder")
    why = f"its folder {folder} is read-only (SQLite writes -wal and -shm files beside it)"
    return StoreUnavailable("write", path, why)
