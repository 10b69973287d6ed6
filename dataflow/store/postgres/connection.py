"""PostgreSQL connections: how they are opened (TCP keepalives that bound how long a dead
host or a cut network goes unnoticed), the rows they return, and what a driver error
means to a user. Queries go to psycopg as they are written, with its own placeholders
(``%s``, ``%(name)s``).
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime
from functools import lru_cache

import psycopg
from psycopg.pq import ExecStatus

from ...errors import BadSQL, NotAStore, StoreMissing, StoreUnavailable
from ..address import DIRECT_ENV, check_url, liveness_timeout, pooled
from ..address import shown as display
from ..base import DRIVER_ERRORS

DRIVER_ERRORS.append(psycopg.Error)
_ROWS = (ExecStatus.TUPLES_OK, ExecStatus.SINGLE_TUPLE)
IDLED_IN_TRANSACTION = "25P03"  # the server ended a session idle inside a transaction
LOCK_TIMED_OUT = "55P03"  # a statement waited for a lock longer than lock_timeout
# (ours: a wait only a stalled session makes so long, PostgresStore.job_turn)
IDLE_S = 1.0  # a connection unused this long is checked before a pipelined transaction
# a pooled transaction's own idle timeout (what a direct session's options set once)
_STALL_LOCAL = "SET LOCAL idle_in_transaction_session_timeout = {ms}"
# psycopg warns, through logging, of a second error while a failed pipeline ends; the
# first is raised, and nothing of ours configures logging: no stray line on stderr
logging.getLogger("psycopg").addHandler(logging.NullHandler())


def conninfo(address: str, through_pooler: bool = False, session: bool = False) -> str:
    """The libpq connection string for a store address, with keepalives on both ends:
    the client notices a dead server, the server a dead client, within the bound. A
    session idle inside a transaction for a quarter of the bound, at least a second (its
    process stopped or starved: ours never idle there, but :meth:`.Store.unhurried`'s),
    is ended by the server, so that the row and advisory locks it holds hold nobody up
    longer: its next statement fails in a way that passes.

    ``through_pooler``: a pooler in transaction mode passes no session settings on (a
    pooled session is anyone's): the client's keepalives only; each transaction sets its
    own idle timeout (:meth:`Connection.transaction`), the pooler its keepalives.

    ``session``: a session of its own at ``$DATAFLOW_DB_DIRECT``, the server's or a
    pooler's in session mode, which refuses the ``options`` startup parameter: the same
    settings are sent once connected instead (:func:`session_settings`)."""
    check_url(address)
    probe, lost_ms = _probe()
    client = {
        "connect_timeout": str(max(2, int(liveness_timeout() / 2))),
        "keepalives": "1",
        "keepalives_idle": probe,
        "keepalives_interval": probe,
        "keepalives_count": "3",
        "tcp_user_timeout": lost_ms,
        "application_name": f"dataflow/{stall_ms()}",  # what end_stalled allows it
    }
    if through_pooler or session:  # (no options: a pooler refuses them; it takes the rest)
        return psycopg.conninfo.make_conninfo(address, **client)
    server = " ".join(f"-c {name}={value}" for name, value in _server_settings())
    return psycopg.conninfo.make_conninfo(address, options=server, **client)


def _probe() -> tuple[str, str]:
    """Both ends' keepalive probe (seconds: a quarter of the bound, at least one) and how
    long unacknowledged data may wait before the connection counts as lost (the bound,
    milliseconds)."""
    bound = liveness_timeout()
    return str(max(1, int(bound / 4))), str(int(bound * 1000))


def _server_settings() -> list[tuple[str, str]]:
    """What a session of ours asks of the server (see :func:`conninfo`)."""
    probe, lost_ms = _probe()
    return [
        ("idle_in_transaction_session_timeout", str(stall_ms())),
        ("tcp_keepalives_idle", probe),
        ("tcp_keepalives_interval", probe),
        ("tcp_keepalives_count", "3"),
        ("tcp_user_timeout", lost_ms),
        ("DateStyle", "ISO"),
    ]


def session_settings() -> str:
    """The settings of :func:`conninfo`'s ``options`` as statements, for a session that
    is ours until it ends (a session pooler resets them when it lends it again)."""
    return "; ".join(f"SET {name} = '{value}'" for name, value in _server_settings())


def stall_ms() -> int:
    """How long a session of ours may hold its locks while its process does not go on
    (stopped, starved): a quarter of the bound, at least a second (milliseconds)."""
    return max(1000, int(liveness_timeout() * 250))


def _seed_text(value: object) -> object:
    """Timestamps as the seed prints them (``YYYY-MM-DD HH:MM:SS.ffffff``), like SQLite's."""
    if isinstance(value, datetime):
        return value.isoformat(sep=" ", timespec="microseconds")
    return value


class Record(tuple):
    """A row readable by position and by column name, like ``sqlite3.Row``."""

    names: tuple[str, ...] = ()

    def keys(self) -> tuple[str, ...]:
        return self.names

    def __getitem__(self, key):  # type: ignore[override]
        if isinstance(key, str):
            return tuple.__getitem__(self, self.names.index(key))
        return tuple.__getitem__(self, key)


@lru_cache(maxsize=256)
def _record_kind(names: tuple[str, ...]) -> type[Record]:
    return type("Record", (Record,), {"names": names, "__slots__": ()})


def _has_rows(result) -> bool:
    """Did the statement return a result set (even of no columns: ``SELECT ;``)?"""
    return result is not None and (result.nfields > 0 or result.status in _ROWS)


def _records(cursor: psycopg.Cursor):
    """The row factory. psycopg asks for it at every statement, most of which return no
    row: the names are read from the result, and the row's class made (once per list of
    names), only when a row is made (``description``'s objects and a new class each time
    would cost more than a short statement)."""
    kind: type[Record] | None = None

    def make(values: Sequence[object]) -> Record:
        nonlocal kind
        if kind is None:
            result = cursor.pgresult
            count = result.nfields if result is not None else 0
            names = (result.fname(i) for i in range(count))
            kind = _record_kind(tuple(n.decode(errors="replace") if n else "" for n in names))
        return kind(_seed_text(v) for v in values)

    return make


def marks(count: int) -> str:
    """``count`` placeholders of this driver, comma separated."""
    return ", ".join(["%s"] * count)


class Cursor:
    """What a query returned, with the parts of ``sqlite3.Cursor`` the store reads. In a
    pipelined transaction its result is waited for only when it is read."""

    def __init__(self, cursor: psycopg.Cursor, pipeline: psycopg.Pipeline | None = None):
        self._cursor = cursor
        self._pipeline = pipeline

    def _result(self):
        if self._cursor.pgresult is None and self._pipeline is not None:
            self._pipeline.sync()  # what was sent so far, this statement included
        return self._cursor.pgresult

    @property
    def rowcount(self) -> int:
        self._result()
        return self._cursor.rowcount

    @property
    def description(self):
        self._result()
        return self._cursor.description

    def fetchone(self):
        return self._cursor.fetchone() if _has_rows(self._result()) else None

    def fetchall(self) -> list:
        return self._cursor.fetchall() if _has_rows(self._result()) else []

    def __iter__(self):
        return iter(self.fetchall())


class Connection:
    """A psycopg connection in autocommit mode (transactions are ours), opened again when
    it was lost between transactions. ``pooled``: to a pooler in transaction mode, where
    a session is ours for one transaction only: no statement is prepared on the server
    (the next transaction's session would not know it), and each transaction sets the
    idle timeout that a direct connection's options set once."""

    def __init__(
        self, raw: psycopg.Connection, address: str, pooled: bool = False, session: bool = False
    ):
        self.raw = raw
        self.address = address
        self.pooled = pooled
        self.session = session  # its settings sent once connected (conninfo's session)
        self._pipeline: psycopg.Pipeline | None = None
        self._used = time.monotonic()  # when the last transaction ended

    @contextmanager
    def transaction(self, pipeline: bool = False) -> Iterator[None]:
        """A transaction. A connection lost while it was idle (during a long job, say) is
        opened again first: nothing of the transaction has run yet.

        With ``pipeline`` (psycopg's pipeline mode), a statement is sent without waiting
        for the one before; the client waits only to read a result. BEGIN then goes with
        the first query and COMMIT with the last writes, one round trip each fewer; but
        after an idle spell BEGIN is sent alone, so that a connection lost meanwhile is
        opened again before anything runs, as without."""
        if self.broken:
            self.raw = _reopen(self.address, self.pooled, self.session)
        together = pipeline and time.monotonic() - self._used < IDLE_S
        if not together:
            try:
                self._begin()
            except psycopg.OperationalError:
                self.raw.close()
                self.raw = _reopen(self.address, self.pooled, self.session)
                self._begin()
        try:
            if pipeline:
                with self.raw.pipeline() as self._pipeline:
                    if together:
                        self._begin()
                    yield
                    self.execute("COMMIT")
            else:
                yield
                self.execute("COMMIT")
        except BaseException:
            self._pipeline = None
            if not self.broken:
                self.execute("ROLLBACK")
            raise
        finally:
            self._pipeline = None
            self._used = time.monotonic()

    def _begin(self) -> None:
        """BEGIN; through a pooler, with this transaction's idle timeout (one round trip:
        two statements in one query, or both in the pipeline)."""
        if not self.pooled:
            self.execute("BEGIN")
        elif self._pipeline is not None:
            self.execute("BEGIN")
            self.execute(_STALL_LOCAL.format(ms=stall_ms()))
        else:
            self.raw.execute(f"BEGIN; {_STALL_LOCAL.format(ms=stall_ms())}")

    @contextmanager
    def read_only(self) -> Iterator[None]:
        """A read-only transaction, rolled back at its end."""
        with self.raw.transaction(force_rollback=True):
            if self.pooled:
                self.execute(_STALL_LOCAL.format(ms=stall_ms()))
            self.execute("SET TRANSACTION READ ONLY")
            self.execute("SELECT 1")  # after a query, nothing may make it read-write
            yield

    def execute(self, sql: str, params: Sequence[object] | Mapping[str, object] = ()) -> Cursor:
        return Cursor(self.raw.execute(sql, params), self._pipeline)

    def execute_text(self, sql: str) -> Cursor:
        """A statement typed by a user, sent as it is: one statement (the extended protocol
        refuses more), no placeholders. Through a pooler, unnamed (a pipeline's statement
        is never prepared under a name, and is one statement too)."""
        if self.pooled:
            with self.raw.pipeline():
                cursor = self.raw.execute(sql)
            return Cursor(cursor)
        return Cursor(self.raw.execute(sql, prepare=True))  # one statement, no more

    def execute_script(self, sql: str) -> None:
        """Our own script of several statements (a migration)."""
        self.raw.execute(sql)

    def executemany(self, sql: str, rows: Iterable[Sequence[object]]) -> None:
        for row in rows:
            self.execute(sql, row)

    def copy(self, sql: str, rows: Iterable[Sequence[object]]) -> None:
        """``COPY ... FROM STDIN`` of these rows."""
        with self.raw.cursor().copy(sql) as copy:
            for row in rows:
                copy.write_row(row)

    def close(self) -> None:
        self.raw.close()

    @property
    def broken(self) -> bool:
        return self.raw.closed or self.raw.broken


def connect(address: str, session: bool = False) -> Connection:
    """An autocommit connection to the store's database (through its pooler when
    ``$DATAFLOW_DB_DIRECT`` names the server's own address: :func:`..address.pooled`).
    ``session``: to ``$DATAFLOW_DB_DIRECT`` itself (see :func:`conninfo`)."""
    through_pooler = pooled(address)
    return Connection(_open(address, through_pooler, session), address, through_pooler, session)


def _open(address: str, through_pooler: bool = False, session: bool = False) -> psycopg.Connection:
    # through a pooler: never a statement prepared under a name (psycopg prepares one run
    # five times by default; PgBouncer before 1.21 passes it to a session that lacks it)
    prepare = {"prepare_threshold": None} if through_pooler else {}
    try:
        raw = psycopg.connect(
            conninfo(address, through_pooler, session), autocommit=True, **prepare
        )
        if session:  # (a session pooler's queue, when its sessions are all lent, waits here)
            try:
                raw.execute(session_settings())
            except BaseException:
                raw.close()
                raise
    except psycopg.Error as exc:
        raise unavailable(address, exc) from None
    raw.cursor_factory = psycopg.Cursor
    raw.row_factory = _records
    return raw


def _reopen(
    address: str, through_pooler: bool = False, session: bool = False
) -> psycopg.Connection:
    """The connection again, lost since it was opened: a server that refuses it now (it
    restarts) may take it in a moment, so the failure passes (the store's patience says
    for how long it is tried)."""
    try:
        return _open(address, through_pooler, session)
    except StoreUnavailable as exc:
        exc.passing = True
        raise


# -- what a driver error means -----------------------------------------------------------


def passing(exc: BaseException) -> bool:
    """A lost connection or a server going down or up (the next transaction connects
    again), a deadlock or serialization failure (rolled back whole), a session ended
    because it idled inside a transaction (rolled back), a lock waited for too long."""
    state = getattr(exc, "sqlstate", None) or ""
    lost = outcome_unknown(exc) or state == IDLED_IN_TRANSACTION
    return lost or state.startswith("40") or state == LOCK_TIMED_OUT


def lock_timed_out(exc: BaseException) -> bool:
    return getattr(exc, "sqlstate", None) == LOCK_TIMED_OUT


def outcome_unknown(exc: BaseException) -> bool:
    """A lost connection or a server going down: a COMMIT sent may have been done."""
    state = getattr(exc, "sqlstate", None) or ""
    lost = isinstance(exc, psycopg.OperationalError) and not state
    return lost or state.startswith(("08", "57P"))


def _scrubbed(address: str, exc: psycopg.Error) -> str:
    """The driver's message on one line, without the password it may quote (libpq
    repeats, in double quotes, a URL or a part of one that it cannot parse)."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    try:
        password = psycopg.conninfo.conninfo_to_dict(address).get("password")
    except psycopg.Error:
        password = None
    text = display(text.replace(address, display(address)))
    if password:  # libpq quotes what it echoes of an address: masked there, not elsewhere
        text = re.sub(r'"[^"]*"', lambda quoted: quoted[0].replace(str(password), "***"), text)
    return text


def unavailable(address: str, exc: psycopg.Error) -> StoreUnavailable | StoreMissing:
    """Why a connection could not be had, in one line."""
    reason = _scrubbed(address, exc)
    missing = re.search(r'database "(.*)" does not exist', reason)
    if missing:  # createtables makes tables, not the database: that is the server's admin's
        name = missing.group(1)
        return StoreMissing(
            display(address),
            f"the server has no database '{name}': create it (createdb {name}), then ",
        )
    if "unsupported startup parameter" in reason:  # PgBouncer's word for our options
        reason += f" (a pooler's address: set {DIRECT_ENV} to the server's own, docs/stores.md)"
    return StoreUnavailable("connect to", display(address), reason)


def failure(address: str, exc: psycopg.Error) -> StoreUnavailable | NotAStore | BadSQL | None:
    """What a driver error says about the store (lost connection, disk full), or None
    when it is about the statement."""
    ended = isinstance(exc, psycopg.OperationalError) or exc.sqlstate == IDLED_IN_TRANSACTION
    if ended and not isinstance(exc, psycopg.errors.QueryCanceled):
        return StoreUnavailable("use", display(address), _scrubbed(address, exc))
    if isinstance(exc, psycopg.errors.UndefinedTable):
        return NotAStore(display(address), "it has no dataflow tables; run 'utility createtables'")
    return None
