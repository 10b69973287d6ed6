"""The PostgreSQL store: one database shared by RunJobs on many hosts.

Its SQL is the named queries of ``queries/*.sql`` (psycopg's own placeholders); the
operations that run them are :class:`dataflow.store.base.Store`'s, the same on every
backend. Here: what a backend writes (:class:`dataflow.store.connector.Connector`), and
the few operations whose PostgreSQL form differs, each saying why; the claim's are in
:mod:`.claims`; connections and transactions are :mod:`.connection`'s. Writers are not serialized as SQLite's are: a claim locks the
candidate rows it looks at (``FOR UPDATE SKIP LOCKED``, never a table lock) and takes a
chunk's offer lock before checking it, and ``max_parallel`` takes the job's cap lock
(:meth:`job_turn`).

A run's liveness is its lease (``liveness = "lease"``): a session-level advisory lock on its chunk and a heartbeat
on its history row, both held by a keeper process on the run's host
(:mod:`dataflow.run.lease.keeper`) for as long as any process of the run lives there.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager, suppress
from datetime import datetime

import psycopg

from ...errors import BadSQL, NotAStore, ReadOnlySQL, StoreUnavailable, StoreVersion
from ..address import direct_address, expanded, liveness_timeout, state_folder
from ..base import TABLES, Row, zoned_now
from ..connector import Params
from ..leases import LeaseStore
from ..queries import NamedQueries
from . import schema
from .claims import ClaimQueries
from .connection import (
    Connection,
    connect,
    display,
    failure,
    lock_timed_out,
    marks,
    outcome_unknown,
    passing,
    stall_ms,
)

QUERIES = NamedQueries(__package__)
SETTLE_WAIT_MS = 50  # how long a scrape waits for the writers of run to settle runs
FOLD_EVERY = 1024  # the finish of each run numbered a multiple of it folds chunk_pending


class PostgresStore(ClaimQueries, LeaseStore):
    """An open PostgreSQL store. Use :meth:`open` or :meth:`create`."""

    version = schema.VERSION
    q = QUERIES
    marks = staticmethod(marks)

    @property
    def patience(self) -> float:  # type: ignore[override]
        """A server that restarts or a connection cut for less than the liveness bound."""
        return liveness_timeout()

    def clock(self) -> datetime:
        """The server's time: a host whose own clock is off does not move it."""
        return datetime.fromisoformat(str(self.conn.execute(self.q.clock).fetchone()[0]))

    def passing(self, exc: BaseException) -> bool:
        """A lost connection or a server going down or up (the next transaction connects
        again), a deadlock or serialization failure (rolled back whole)."""
        return passing(exc) or super().passing(exc)

    def outcome_unknown(self, exc: BaseException) -> bool:
        """A lost connection or a server going down: a COMMIT sent may have been done."""
        return outcome_unknown(exc)

    def failure(self, exc: BaseException) -> Exception | None:
        """A lost connection, a database without our tables (:func:`.connection.failure`)."""
        return failure(self.address, exc) if isinstance(exc, psycopg.Error) else None

    def __init__(self, address: str, conn: Connection):
        self.path = address  # type: ignore[assignment]
        self.address = address
        self.conn = conn
        self.files = self.files_of(address)
        self.lockfile = self.lockfile_of(address)
        self.identity = self._name(address)
        self._turns: dict[str, bool] = {}
        self._facts: dict = {}
        self._fold_due = False  # a finish of this transaction asks for a fold once committed

    # -- where this host keeps its part ------------------------------------------------

    @staticmethod
    def _name(address: str) -> str:
        """host-port-database: names this store's files on a host, and its runs' tokens."""
        info = psycopg.conninfo.conninfo_to_dict(address)
        parts = (info.get("host") or "local", info.get("port") or "5432", info.get("dbname") or "")
        return re.sub(r"[^A-Za-z0-9_.-]", "_", "-".join(str(p) for p in parts))

    @classmethod
    def _state(cls) -> str:
        found = state_folder()  # $DATAFLOW_STATE: absolute (an empty one is refused)
        if found is not None:
            return found
        # as Path.home() joins it: a $HOME of "/home//u" or "/home/./u" named as "/home/u"
        return expanded("~/.local/state/dataflow")

    @classmethod
    def local_name(cls, address: str) -> str:  # type: ignore[override]
        """The store's name in this host's state folder ($DATAFLOW_STATE, else
        ~/.local/state/dataflow): its run logs and chunk locks there."""
        return os.path.join(cls._state(), cls._name(address))

    # -- opening -------------------------------------------------------------------------

    @classmethod
    def open(cls, address: str, readonly: bool = False) -> PostgresStore:  # type: ignore[override]
        return cls._checked(cls(address, connect(address)))

    @classmethod
    def open_session(cls, address: str) -> PostgresStore:  # type: ignore[override]
        """Straight to the server, or to a pooler in session mode (``$DATAFLOW_DB_DIRECT``),
        when ``address`` is a pooler's (in transaction mode);
        this host's files and runs' tokens stay named by ``address``. The two must reach
        the same database: checked when the pooler answers (the lease does not need it)."""
        direct = direct_address()
        if direct is None or direct == address:
            return cls.open(address)
        store = cls._checked(cls(address, connect(direct, session=True)))
        try:
            store._same_database(direct)
        except BaseException:
            store.close()
            raise
        return store

    @classmethod
    def _checked(cls, store: PostgresStore) -> PostgresStore:
        found = store._version()
        if found != schema.VERSION:
            store.close()
            if found == 0:
                why = "it has no dataflow tables; run 'utility createtables'"
                raise NotAStore(display(store.address), why)
            raise StoreVersion(display(store.address), found, schema.VERSION)
        return store

    def _same_database(self, direct: str) -> None:
        here = tuple(self.conn.execute(self.q.server_identity).fetchone())
        try:
            pooler = connect(self.address)
        except StoreUnavailable:
            return
        try:
            there = tuple(pooler.execute(self.q.server_identity).fetchone())
        except psycopg.Error:
            return
        finally:
            pooler.close()
        if here != there:
            why = f"$DATAFLOW_DB_DIRECT ({display(direct)}) reaches another server or database"
            mistake = StoreUnavailable("use", display(self.address), why)
            mistake.lasting = True  # a keeper says so at once: waiting does not mend it
            raise mistake

    @classmethod
    def create(cls, address: str) -> tuple[PostgresStore, int]:  # type: ignore[override]
        store = cls(address, connect(address))
        try:
            with store.transaction():
                store.conn.execute(store.q.one_creator)
                found = store._version()
                if found > schema.VERSION:
                    raise StoreVersion(display(address), found, schema.VERSION)
                for version in range(found + 1, schema.VERSION + 1):
                    store.conn.execute_script(schema.migration(version))
                store.conn.execute(store.q.clear_schema_version)
                store.conn.execute(store.q.add_schema_version, (schema.VERSION,))
        except psycopg.Error as exc:
            store.close()
            raise failure(address, exc) or NotAStore(display(address), str(exc)) from None
        except BaseException:
            store.close()
            raise
        return store, schema.VERSION - found

    def _version(self) -> int:
        exists = self.conn.execute(self.q.schema_exists).fetchone()
        if not exists[0]:
            return 0
        row = self.conn.execute(self.q.schema_version).fetchone()
        return row[0] or 0

    def close(self) -> None:
        self.conn.close()

    @contextmanager
    def transaction(self, pipeline: bool = False) -> Iterator[None]:
        """A transaction (:meth:`.connection.Connection.transaction`: a connection lost
        while it was idle is opened again first; ``pipeline``: psycopg's pipeline mode)."""
        self._fold_due = False
        try:
            with self.conn.transaction(pipeline):
                self._turns, self._facts = {}, {}  # an xact lock lasts as long as its
                try:  # transaction, and what was read ahead is for this one
                    yield
                finally:
                    self._turns, self._facts = {}, {}
        except psycopg.Error as exc:  # a wait that only a stalled session makes so long:
            if lock_timed_out(exc) and not self.conn.broken:  # it ends before the retry
                with suppress(psycopg.Error):
                    self.end_stalled()
            raise
        if self._fold_due:
            self._fold_due = False
            self._fold_apart()

    def inserted_id(self, sql: str, params: Params) -> int:
        """The query's ``RETURNING`` (psycopg has no last row id)."""
        return self.conn.execute(sql, params).fetchone()[0]

    @contextmanager
    def settling(self) -> Iterator[None]:
        """A transaction that holds run against writers (SHARE), waited for a moment
        only: a claim numbers its run before it commits, and one under way would commit
        below the point settled. A scrape does not wait behind a long writer (``utility
        purge``): it settles nothing this time."""
        with self.transaction():
            self.conn.execute(self.q.bounded_waits, (str(SETTLE_WAIT_MS),))
            self.conn.execute(self.q.hold_run_writes)
            yield

    def unhurried(self) -> None:
        self.conn.execute(self.q.unhurried)

    def job_turn(self, jobid: str) -> None:
        """Waited for a quarter of the bound at most: claims alone take it, each for
        milliseconds (a longer wait fails in a way that passes; see :meth:`transaction`)."""
        self.conn.execute(self.q.bounded_waits, (str(stall_ms()),))
        self.conn.execute(self.q.job_turn, (schema.CAP, jobid))
        self.conn.execute(self.q.unbounded_waits)

    def chunk_turn(self, dataid: str, wait: bool = False) -> bool:
        """The chunk's offer lock, the one every datastatus trigger takes (schema.offer_lock);
        :meth:`candidates` took it already for the candidate it returned."""
        if self._turns.get(dataid):
            return True
        if wait:  # nothing to read: the server runs what follows only once it is had
            self.conn.execute(self.q.chunk_turn, (dataid,))
            return True
        return bool(self.conn.execute(self.q.try_chunk_turn, (dataid,)).fetchone()[0])

    def chunk_turns(self, dataids: Sequence[str]) -> None:
        """One statement: in the triggers' order (by lock), so that two transactions that
        want some of the same wait for each other, never deadlock."""
        wanted = [dataid for dataid in set(dataids) if not self._turns.get(dataid)]
        if wanted:
            self.conn.execute(self.q.chunk_turns, (wanted,))
            self._turns.update(dict.fromkeys(wanted, True))

    # -- operations whose PostgreSQL form differs (Store's are the same on every backend) --

    def replace_rows(self, table: str, rows: Iterable[Sequence[object]]) -> None:
        """COPY: a million rows in seconds, not one round trip each; and the sequences of
        the tables numbered by the server set past the rows copied."""
        columns = ", ".join(TABLES[table])
        self.conn.execute(self.q.delete_rows.format(table=table))
        copying = self.q.copy_rows.format(table=table, columns=columns)
        self.conn.copy(copying, rows)
        if table == "run":
            self.conn.execute(self.q.renumber_runs)
        elif table == "deploy":
            self.conn.execute(self.q.renumber_deploys)
        elif table == "action":
            self.conn.execute(self.q.renumber_actions)

    def start_run(self, **run: object) -> int:
        """Insert a RUNNING history row whose lease starts now (the lease's columns, which
        a file store has not); returns its runid."""
        return self.start_runs([run])[0]

    def start_runs(self, runs: Sequence[dict[str, object]]) -> list[int]:
        """One statement for the runs of a claim (of one job, at distinct dataids, with
        the same columns), not a round trip each; their runids in their order."""
        if not runs:
            return []
        chunks = [(run["jobid"], run["dataid"]) for run in runs]
        if len(set(chunks)) < len(runs) or any(run.keys() != runs[0].keys() for run in runs):
            return [self.start_runs([run])[0] for run in runs]
        columns = list(runs[0])
        rows = ", ".join([f"('RUNNING', %s, now(), %s, {marks(len(columns))})"] * len(runs))
        sql = self.q.start_runs.format(columns=", ".join(columns), rows=rows)
        params = [v for run in runs for v in (zoned_now(), liveness_timeout(), *run.values())]
        runids = {(jobid, dataid): runid for runid, jobid, dataid in self.conn.execute(sql, params)}
        return [runids[chunk] for chunk in chunks]

    def end_run(self, runid: int, status: str, **outcome: object) -> tuple[bool, str | None]:
        """One statement, not two round trips: the rerun asked comes back from the UPDATE."""
        row = self.conn.execute(*self._ending(runid, status, outcome)).fetchone()
        if row is not None and runid % FOLD_EVERY == 0:
            self._fold_due = True  # chunk_pending stays bounded however long nobody reads status
        return row is not None, row[0] if row else None

    def _fold_apart(self) -> None:
        """A finish's fold, once the finish is committed, in a transaction of its own: it
        holds none of the finish's locks, and a fold that fails (a statement timeout, a
        cancel, a role that may not write the summary) fails nothing; the next fold, or a
        reader's, folds what it left."""
        with suppress(psycopg.Error, StoreUnavailable), self.conn.transaction():
            self._fold()

    def _fold(self) -> None:
        """The chunks written since the last fold into the summary, unless another
        transaction is folding them (migration 8); the fold reads after the lock is taken."""
        if self.conn.execute(self.q.fold_lock).fetchone()[0]:
            self.conn.execute(self.q.fold_chunk_tally)

    def history(self, jobid: str | None, dataid: str | None, limit: int) -> list[Row]:
        """Run history, newest first; ``last_seen``: when a live run's keeper last renewed
        its lease (empty once no process of the run lives), a column a file store has not;
        one query whatever is given (the server plans it at each call)."""
        params = {"jobid": jobid, "dataid": dataid, "limit": limit}
        return [dict(row) for row in self.conn.execute(self.q.history, params)]

    def status_counts(self) -> list[Row]:
        """Chunks per registered job and OUT status (migration 8's summary), the chunks
        written since the last fold folded in first unless another reader is folding
        them, or this one may not write (a role that may only read, a standby); exact
        either way."""
        if self.conn.raw.info.transaction_status == psycopg.pq.TransactionStatus.IDLE:
            with (
                suppress(
                    psycopg.errors.InsufficientPrivilege, psycopg.errors.ReadOnlySqlTransaction
                ),
                self.transaction(),
            ):
                self._fold()
        return super().status_counts()

    def purgeable_runs(self, jobid: str | None, before: str | None) -> list[Row]:
        """As Store's, and not a run whose lease is fresh: its process may live on another
        host (a shortened lease does not free a live run's history: this host's bound)."""
        params = {"jobid": jobid, "before": before, "bound": liveness_timeout()}
        return [dict(row) for row in self.conn.execute(self.q.purgeable_runs, params)]

    # -- SQL typed by users --------------------------------------------------------------

    def query(self, sql: str) -> tuple[list[str], list[tuple]]:
        """One statement in a read-only transaction that is then rolled back."""
        if not sql.strip():
            raise BadSQL("empty statement")
        conn = connect(self.address)
        try:
            with conn.read_only():
                cursor = conn.execute_text(sql)
                columns = [c.name for c in cursor.description or ()]
                return columns, [tuple(row) for row in cursor.fetchall()]
        except psycopg.errors.ReadOnlySqlTransaction:
            raise ReadOnlySQL() from None
        except psycopg.Error as exc:
            raise self._refused(exc) from None
        finally:
            conn.close()

    def execute(self, sql: str) -> tuple[list[str], list[tuple], int]:
        if not sql.strip():
            raise BadSQL("empty statement")
        try:
            with self.transaction():
                cursor = self.conn.execute_text(sql)
                columns = [c.name for c in cursor.description or ()]
                rows = [tuple(row) for row in cursor.fetchall()]
                return columns, rows, max(cursor.rowcount, 0)
        except psycopg.Error as exc:
            raise self._refused(exc) from None

    def _refused(self, exc: psycopg.Error) -> Exception:
        """Why a user's statement failed: the store out of reach, else the statement (a
        table it names that is not there is its mistake, not a store without tables)."""
        meaning = failure(self.address, exc)
        if isinstance(meaning, StoreUnavailable):
            return meaning
        return BadSQL(" ".join(str(exc).split()))
