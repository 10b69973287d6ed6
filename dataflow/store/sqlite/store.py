"""The SQLite store: one file in WAL mode; its connection, transactions, migrations
and the claim's queries. Its other queries live in :mod:`.views`, :mod:`.config` and
:mod:`.history`.

The store knows tables and transactions, nothing of processes or rules: the
claim and finish rules are in :mod:`dataflow.run.lifecycle`.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from ...dataids import natural_key
from ...errors import BadSQL, NotAStore, ReadOnlySQL, StoreMissing, StoreVersion
from ..base import DRIVER_ERRORS, ChunkRow, JobItem, Row, Store, now
from . import schema
from .config import ConfigQueries
from .filesystems import require_local
from .history import HistoryQueries
from .views import ViewQueries

BUSY_TIMEOUT_S = 60.0
DRIVER_ERRORS.append(sqlite3.Error)


def _connect(path: Path, create: bool) -> sqlite3.Connection:
    # a URI names the open mode; "%", "?" and "#" are the characters it must escape
    escaped = str(path).replace("%", "%25").replace("?", "%3f").replace("#", "%23")
    uri = f"file:{escaped}?mode={'rwc' if create else 'rw'}"
    try:
        # isolation_level=None: we issue BEGIN IMMEDIATE ourselves; Python's implicit
        # deferred transactions would let two processes read the same free chunk.
        conn = sqlite3.connect(uri, uri=True, isolation_level=None, timeout=BUSY_TIMEOUT_S)
        conn.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
        conn.execute("PRAGMA synchronous = FULL")
        conn.execute("PRAGMA temp_store = MEMORY")  # measured: bulk trigger work 0.3-0.7x
    except sqlite3.Error as exc:
        if not path.exists():
            raise StoreMissing(str(path)) from None
        raise NotAStore(str(path), str(exc)) from None
    conn.row_factory = sqlite3.Row
    conn.create_function("now", 0, now)
    conn.create_function("dataflow_natkey", 1, natural_key, deterministic=True)
    return conn


class SqliteStore(ViewQueries, ConfigQueries, HistoryQueries, Store):
    """An open SQLite store. Use :meth:`open` or :meth:`create`."""

    version = schema.VERSION

    def __init__(self, path: Path, conn: sqlite3.Connection):
        self.path = path
        self.conn = conn
        self.files = self.files_of(path)

    @staticmethod
    def files_of(path: Path) -> Path:
        """The folder beside the store that holds its lock files and run logs."""
        return path.with_name(path.name + ".d")

    # -- opening -----------------------------------------------------------------

    @classmethod
    def open(cls, path: Path) -> SqliteStore:
        """Open an existing store at the current schema version; never creates one."""
        if not path.exists():
            raise StoreMissing(str(path))
        require_local(path.parent)
        store = cls(path, _connect(path, create=False))
        found = store._version()
        if found != schema.VERSION:
            store.close()
            if found == 0:
                raise NotAStore(str(path), "it has no dataflow tables; run 'utility createtables'")
            raise StoreVersion(str(path), found, schema.VERSION)
        return store

    @classmethod
    def create(cls, path: Path) -> tuple[SqliteStore, int]:
        """Create or upgrade the store; returns it with the number of migrations applied."""
        if not path.parent.is_dir():
            raise NotAStore(str(path), f"folder {path.parent} does not exist")
        require_local(path.parent)
        store = cls(path, _connect(path, create=True))
        try:
            store.conn.execute("PRAGMA journal_mode = WAL")
            with store.transaction():
                found = store._version()
                if found > schema.VERSION:
                    raise StoreVersion(str(path), found, schema.VERSION)
                for version in range(found + 1, schema.VERSION + 1):
                    store._migrate(version)
                store.conn.execute(f"PRAGMA user_version = {schema.VERSION}")
        except sqlite3.DatabaseError as exc:
            store.close()
            raise NotAStore(str(path), str(exc)) from None
        except BaseException:
            store.close()
            raise
        return store, schema.VERSION - found

    def _migrate(self, version: int) -> None:
        """Apply one migration; a table it rebuilds gets back its users' indexes and triggers."""
        table = schema.REBUILDS.get(version)
        theirs = []
        if table:
            rows = self.conn.execute(
                "SELECT name, sql FROM sqlite_master WHERE tbl_name = ? AND sql IS NOT NULL "
                "AND type IN ('index', 'trigger')",
                (table,),
            )
            ours = schema.ours()
            theirs = [sql for name, sql in rows if name not in ours]
        for statement in _statements(schema.MIGRATIONS[version - 1]):
            self.conn.execute(statement)
        for sql in theirs:
            self.conn.execute(sql)

    def _version(self) -> int:
        try:
            return self.conn.execute("PRAGMA user_version").fetchone()[0]
        except sqlite3.DatabaseError as exc:
            raise NotAStore(str(self.path), str(exc)) from None

    def close(self) -> None:
        self.conn.close()

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """A write transaction taken up front (``BEGIN IMMEDIATE``)."""
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            if self.conn.in_transaction:
                self.conn.execute("ROLLBACK")
            raise
        else:
            self.conn.execute("COMMIT")

    # -- configuration -------------------------------------------------------------

    def job_items(self, jobid: str) -> list[JobItem]:
        rows = self.conn.execute(
            "SELECT itemtype, datasetid, itemvalue FROM job WHERE jobid = ? ORDER BY rowid",
            (jobid,),
        )
        return [JobItem(*row) for row in rows]

    def datasets(self, ids: Iterable[str] | None = None) -> dict[str, Row]:
        """Dataset rows by datasetid: the given ones, or all."""
        sql = "SELECT * FROM dataset"
        params: tuple[str, ...] = ()
        if ids is not None:
            params = tuple(ids)
            sql += f" WHERE datasetid IN ({', '.join('?' * len(params))})"
        return {
            row["datasetid"]: dict(row) for row in self.conn.execute(sql + " ORDER BY 1", params)
        }

    def jobs(self) -> list[Row]:
        sql = (
            "SELECT jobid, itemtype, datasetid, itemvalue, modified FROM job ORDER BY jobid, rowid"
        )
        return [dict(row) for row in self.conn.execute(sql)]

    # -- the claim -------------------------------------------------------------------

    def candidates(
        self, jobid: str, limit: int, after: tuple[str, str] | None = None
    ) -> list[tuple[str, str]]:
        """The job's candidates as (sortkey, dataid), in natural order: the first ``limit``
        past ``after`` (a pair as returned, so a row with a wrong key is passed, not looped
        over)."""
        if after is None:
            rows = self.conn.execute(
                "SELECT sortkey, dataid FROM candidate WHERE jobid = ? "
                "ORDER BY sortkey, dataid LIMIT ?",
                (jobid, limit),
            )
        else:
            rows = self.conn.execute(
                "SELECT sortkey, dataid FROM candidate WHERE jobid = ? AND (sortkey, dataid) > (?, ?) "
                "ORDER BY sortkey, dataid LIMIT ?",
                (jobid, *after, limit),
            )
        return [tuple(row) for row in rows]

    def drop_candidate(self, jobid: str, sortkey: str, dataid: str) -> None:
        self.conn.execute(
            "DELETE FROM candidate WHERE jobid = ? AND sortkey = ? AND dataid = ?",
            (jobid, sortkey, dataid),
        )

    def put_candidate(self, jobid: str, dataid: str) -> None:
        self.conn.execute(
            "INSERT OR IGNORE INTO candidate(jobid, sortkey, dataid) VALUES (?, ?, ?)",
            (jobid, natural_key(dataid), dataid),
        )

    def ready_inputs(self, datasetids: Sequence[str], dataid: str) -> int:
        """How many of these datasets have a READY output row at ``dataid``."""
        if not datasetids:
            return 0
        marks = ", ".join("?" * len(datasetids))
        sql = (
            "SELECT COUNT(DISTINCT datasetid) FROM datastatus WHERE datasetid IN "
            f"({marks}) AND dataid = ? AND locktype = 'OUT' AND status = 'READY'"
        )
        return self.conn.execute(sql, (*datasetids, dataid)).fetchone()[0]

    def chunk_rows(self, jobid: str, dataid: str) -> list[ChunkRow]:
        """The job's own datastatus rows (OUT and IN) at ``dataid``."""
        rows = self.conn.execute(
            "SELECT datasetid, locktype, status FROM datastatus WHERE jobid = ? AND dataid = ?",
            (jobid, dataid),
        )
        return [ChunkRow(*row) for row in rows]

    def mark_running(
        self, jobid: str, dataid: str, outputs: Sequence[str], inputs: Sequence[str]
    ) -> None:
        """Record a claim: OUT/RUNNING for each output, IN/RUNNING for each input."""
        upsert = (
            "INSERT INTO datastatus(datasetid, jobid, dataid, locktype, status, modified) "
            "VALUES (?, ?, ?, ?, 'RUNNING', now()) ON CONFLICT(datasetid, jobid, dataid) "
            "DO UPDATE SET locktype = excluded.locktype, status = 'RUNNING', modified = now()"
        )
        rows = [(d, jobid, dataid, "OUT") for d in outputs]
        rows += [(d, jobid, dataid, "IN") for d in inputs]
        self.conn.executemany(upsert, rows)  # the trigger retires the (job, dataid) candidate

    def finish(self, jobid: str, dataid: str, status: str) -> tuple[int, int]:
        """Set the job's OUT rows at ``dataid`` to ``status`` and release its IN rows."""
        updated = self.conn.execute(
            "UPDATE datastatus SET status = ?, modified = now() "
            "WHERE jobid = ? AND dataid = ? AND locktype = 'OUT'",
            (status, jobid, dataid),
        ).rowcount
        released = self.conn.execute(
            "DELETE FROM datastatus WHERE jobid = ? AND dataid = ? AND locktype = 'IN'",
            (jobid, dataid),
        ).rowcount
        return updated, released

    def delete_chunk(self, jobid: str, dataid: str) -> int:
        """Delete every datastatus row of the job at ``dataid``."""
        return self.conn.execute(
            "DELETE FROM datastatus WHERE jobid = ? AND dataid = ?", (jobid, dataid)
        ).rowcount

    def running(self, jobid: str | None = None) -> list[tuple[str, str]]:
        """(jobid, dataid) of every chunk whose OUT rows say RUNNING."""
        sql = "SELECT DISTINCT jobid, dataid FROM datastatus WHERE status = 'RUNNING' AND locktype = 'OUT'"
        if jobid is None:
            return [tuple(row) for row in self.conn.execute(sql)]
        return [tuple(row) for row in self.conn.execute(sql + " AND jobid = ?", (jobid,))]

    def count_running(self, jobid: str) -> int:
        """How many chunks of the job say RUNNING (live runs, once the dead are recovered)."""
        return self.conn.execute(
            "SELECT COUNT(DISTINCT dataid) FROM datastatus "
            "WHERE jobid = ? AND status = 'RUNNING' AND locktype = 'OUT'",
            (jobid,),
        ).fetchone()[0]

    def count_candidates(self, jobid: str) -> int:
        return self.conn.execute(
            "SELECT COUNT(*) FROM candidate WHERE jobid = ?", (jobid,)
        ).fetchone()[0]

    # -- SQL typed by users -------------------------------------------------------------

    def query(self, sql: str) -> tuple[list[str], list[tuple]]:
        """Run one read-only statement; returns column names and rows."""
        self.conn.execute("PRAGMA query_only = ON")
        try:
            cursor = self._user_statement(sql)
            columns = [c[0] for c in cursor.description or ()]
            return columns, [tuple(row) for row in cursor.fetchall()]
        except sqlite3.OperationalError as exc:
            if "readonly" in str(exc):
                raise ReadOnlySQL() from None
            raise BadSQL(str(exc)) from None
        finally:
            self.conn.execute("PRAGMA query_only = OFF")

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
                    changed = self.conn.execute("SELECT changes()").fetchone()[0]
                return columns, rows, changed
        except sqlite3.Error as exc:
            raise BadSQL(str(exc)) from None

    def _user_statement(self, sql: str) -> sqlite3.Cursor:
        if not sql.strip():
            raise BadSQL("empty statement")
        try:
            return self.conn.execute(sql)
        except sqlite3.ProgrammingError as exc:
            raise BadSQL(str(exc)) from None


def _statements(script: str) -> Iterator[str]:
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
