"""The SQLite store: one file in WAL mode. What a backend writes
(:class:`dataflow.store.connector.Connector`): opening and creating the file (its
migrations), its transactions, placeholders and inserts, what a driver error means, SQL
typed by users; its connection is opened by :mod:`.connection`. Its SQL is the named
queries of ``queries/*.sql``; the operations that run them are
:class:`dataflow.store.base.Store`'s, the same on every backend.

The store knows tables and transactions, nothing of processes or rules: the
claim and finish rules are in :mod:`dataflow.run.claim.lifecycle`.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterator
from contextlib import AbstractContextManager, closing, contextmanager
from functools import cached_property

from ...errors import BadSQL, NotAStore, ReadOnlySQL, StoreLinked, StoreMissing, StoreVersion
from ..base import Store
from ..connector import Params
from ..queries import NamedQueries
from . import access, schema
from .connection import (
    Connection,
    as_stored,
    busy_timeout,
    connect,
    failure,
    marks,
    open_failure,
    passing,
    statements,
)
from .filesystems import require_local

SETTLE_WAIT_MS = 50  # how long a scrape waits for SQLite's writers to settle runs

QUERIES = NamedQueries(__package__)


class SqliteStore(Store):
    """An open SQLite store. Use :meth:`open` or :meth:`create`."""

    version = schema.VERSION
    q = QUERIES
    marks = staticmethod(marks)

    @property
    def patience(self) -> float:  # type: ignore[override]
        """Another writer's transaction may hold the store for up to the busy timeout."""
        return busy_timeout()

    def passing(self, exc: BaseException) -> bool:
        """Busy or locked: another writer holds the store; it will let go."""
        return passing(exc) or super().passing(exc)

    def outcome_unknown(self, exc: BaseException) -> bool:
        """Never: a file's COMMIT is done or failed in this process."""
        return False

    def failure(self, exc: BaseException) -> Exception | None:
        """Disk full, I/O error, read-only, damaged (:func:`.connection.failure`)."""
        return failure(self.path, exc) if isinstance(exc, sqlite3.Error) else None

    def __init__(self, path: str, conn: Connection):
        self.path = path
        self.conn = conn
        self.files = self.files_of(path)

    @staticmethod
    def local_name(path: str | os.PathLike) -> str:
        """The database file, symlinks resolved: its run logs and chunk locks beside it."""
        return os.path.realpath(path)

    @cached_property
    def lockfile(self) -> str:
        """The chunk lock file: beside the database file itself, whatever path, symlink or
        relative name reached it, and apart from the logs (cleaning those never touches it).
        A second hard link would be a second name with its own lock file: refused."""
        self._one_name(self.path)
        return self.lockfile_of(self.path)

    @staticmethod
    def _one_name(path: str) -> None:
        """Refuse to write a store file that has a second hard link: every writer (RunJob,
        ready, dml...) follows the rule of the chunk locks kept beside one name."""
        links = os.stat(path).st_nlink
        if links > 1:
            raise StoreLinked(os.path.realpath(path), links)

    @cached_property
    def identity(self) -> str:
        """The database file's device and inode: the same for every path that reaches it."""
        found = os.stat(self.path)
        return f"{found.st_dev}:{found.st_ino}"

    # -- opening -----------------------------------------------------------------

    @classmethod
    def open(cls, path: str | os.PathLike, readonly: bool = False) -> SqliteStore:
        """Open an existing store at the current schema version; never creates one.
        ``readonly``: for a command that only reads, which then also works where the store
        cannot be written (a read-only folder, file or disk)."""
        path = os.fspath(path)
        if not os.path.exists(path):
            raise StoreMissing(path)
        require_local(access.folder(path))
        if not readonly:
            cls._one_name(path)
        reading = readonly and not access.writable(path)
        store = cls(path, connect(path, "ro" if reading else "rw"))
        found = store._version(reading)
        if found != schema.VERSION:
            store.close()
            if found == 0:
                raise NotAStore(path, "it has no dataflow tables; run 'utility createtables'")
            raise StoreVersion(path, found, schema.VERSION)
        return store

    @classmethod
    def create(cls, path: str | os.PathLike) -> tuple[SqliteStore, int]:
        """Create or upgrade the store; returns it with the number of migrations applied."""
        path = os.fspath(path)
        folder = access.folder(path)
        if not os.path.isdir(folder):
            raise NotAStore(path, f"folder {folder} does not exist")
        require_local(folder)
        if os.path.exists(path):
            cls._one_name(path)
        store = cls(path, connect(path, "rwc"))
        try:
            store.conn.execute(store.q.wal)
            store._check_intact()  # before a transaction: a large store takes a while
            with store.transaction():
                found = store._version()
                if found > schema.VERSION:
                    raise StoreVersion(path, found, schema.VERSION)
                for version in range(found + 1, schema.VERSION + 1):
                    store._migrate(version)
                store.conn.execute(store.q.set_schema_version.format(version=schema.VERSION))
        except sqlite3.Error as exc:
            store.close()
            raise failure(path, exc) or NotAStore(path, str(exc)) from None
        except BaseException:
            store.close()
            raise
        return store, schema.VERSION - found

    def _migrate(self, version: int) -> None:
        """Apply one migration; a table it rebuilds gets back its users' indexes and triggers."""
        table = schema.REBUILDS.get(version)
        theirs = []
        if table:
            rows = self.conn.execute(self.q.indexes_and_triggers, (table,))
            ours = schema.ours()
            theirs = [sql for name, sql in rows if name not in ours]
        for statement in statements(schema.migration(version)):
            self.conn.execute(statement)
        for sql in theirs:
            self.conn.execute(sql)

    def _version(self, reading: bool = False) -> int:
        """The schema version: the first read of the file, where opening it may yet fail."""
        try:
            return self.conn.execute(self.q.schema_version).fetchone()[0]
        except sqlite3.Error as exc:
            self.close()
            raise open_failure(self.path, exc, reading) from None

    def _check_intact(self) -> None:
        """Refuse a damaged file: its header may still read as up to date."""
        problems = [row[0] for row in self.conn.execute(self.q.quick_check)]
        if problems != ["ok"]:
            found = " ".join(problems[0].split())  # one line, as every error
            raise NotAStore(self.path, f"it is damaged ({found}); restore a backup")

    def close(self) -> None:
        self.conn.close()

    def transaction(self, pipeline: bool = False) -> AbstractContextManager[None]:
        """A write transaction taken up front (``BEGIN IMMEDIATE``); in process, nothing
        to gain by a pipeline."""
        return self.conn.transaction()

    def inserted_id(self, sql: str, params: Params) -> int:
        return self.conn.execute(sql, params).lastrowid

    @contextmanager
    def settling(self) -> Iterator[None]:
        """Replaced: the write transaction is waited for a moment only, not for the busy
        timeout: a scrape does not wait behind a long writer (``utility purge``), it
        settles nothing this time."""
        self.conn.raw.execute(f"PRAGMA busy_timeout = {SETTLE_WAIT_MS}")
        try:
            with self.transaction():
                yield
        finally:
            self.conn.raw.execute(f"PRAGMA busy_timeout = {int(busy_timeout() * 1000)}")

    # -- the claim's read ----------------------------------------------------------------

    def candidates(
        self, jobid: str, limit: int, after: tuple[str, str] | None = None, lock: bool = True
    ) -> list[tuple[str, str]]:
        """The job's candidates as (sortkey, dataid), in natural order: the first ``limit``
        past ``after``, bound as stored (text an outside client wrote that is not UTF-8 is
        bound as the bytes it was). Nothing to lock: a claim holds the write lock."""
        if after is None:
            rows = self.conn.execute(self.q.candidates, (jobid, limit))
        else:
            params = (jobid, *map(as_stored, after), limit)
            rows = self.conn.execute(self.q.candidates_after, params)
        return [tuple(row) for row in rows]

    # -- SQL typed by users -------------------------------------------------------------

    def query(self, sql: str) -> tuple[list[str], list[tuple]]:
        """Run one read-only statement; returns column names and rows. It runs on its own
        read-only connection (with query_only), under a guard that refuses what those let
        through: ATTACH (and VACUUM INTO), DETACH, PRAGMA x = y."""
        guard = access.ReadGuard()
        with closing(connect(self.path, "ro")) as conn:
            conn.raw.set_authorizer(guard)
            try:
                cursor = self._user_statement(sql, conn)
                columns = [c[0] for c in cursor.description or ()]
                return columns, [tuple(row) for row in cursor.fetchall()]
            except sqlite3.Error as exc:
                name = getattr(exc, "sqlite_errorname", None) or ""
                if name == "SQLITE_AUTH" or name.startswith("SQLITE_READONLY"):
                    raise ReadOnlySQL(guard.refused) from None
                raise failure(self.path, exc) or BadSQL(str(exc)) from None

    def execute(self, sql: str) -> tuple[list[str], list[tuple], int]:
        """Run one statement in its own write transaction; returns columns, rows, rows changed."""
        try:
            with self.transaction():
                before = self.conn.total_changes
                cursor = self._user_statement(sql)
                columns = [c[0] for c in cursor.description or ()]
                rows = [tuple(row) for row in cursor.fetchall()]
                # rowcount misses "WITH ... INSERT"; changes() counts rows of the statement
                # itself, not of our triggers, but is stale after DDL: hence the guard.
                changed = 0
                if self.conn.total_changes != before:
                    changed = self.conn.execute(self.q.changes).fetchone()[0]
                return columns, rows, changed
        except sqlite3.Error as exc:
            raise failure(self.path, exc) or BadSQL(str(exc)) from None

    def _user_statement(self, sql: str, conn: Connection | None = None) -> sqlite3.Cursor:
        if not sql.strip():
            raise BadSQL("empty statement")
        try:
            return (conn or self.conn).execute(sql)
        except sqlite3.ProgrammingError as exc:
            raise BadSQL(str(exc)) from None
        except UnicodeEncodeError:  # bytes that are not UTF-8, as Python passes them on
            raise BadSQL("the statement is not valid UTF-8 text") from None
