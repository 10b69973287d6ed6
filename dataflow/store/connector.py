"""The seam between the store's operations and a backend: what a backend writes.

:class:`dataflow.store.base.Store` holds every operation the toolkit asks of a store
(the claim, the finish, the run history, the views...), each one a concrete method that
runs the backend's named query of that name (``queries/*.sql`` of the backend's package,
loaded by :class:`.queries.NamedQueries`) through the backend's connection. A backend is
a subclass of ``Store`` that writes the abstract methods of :class:`Connector` below
(tests/test_store_seam.py counts them: at most 20), sets its attributes, and keeps its
SQL in its package; it overrides an operation only where its database really differs
(PostgreSQL's claim, which locks what it reads). A backend whose runs need a lease every
host sees subclasses :class:`dataflow.store.leases.LeaseStore` and writes its methods too.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from datetime import datetime

from .address import Address
from .queries import NamedQueries

Params = Sequence[object] | Mapping[str, object]

# Exception classes of loaded backends' drivers: the CLI reports them as store errors.
DRIVER_ERRORS: list[type[Exception]] = []


TYPE_CHECKING = False  # typing's flag, without importing typing (a run's start)
if TYPE_CHECKING:  # what a backend's driver gives, for readers and type checkers
    from typing import Any, Protocol

    class Cursor(Protocol):
        """What a statement returned: its rows, each readable by position and by column name
        (``dict(row)`` gives the columns), and how many rows it changed."""

        rowcount: int

        def fetchone(self) -> Any: ...

        def fetchall(self) -> list[Any]: ...

        def __iter__(self) -> Iterator[Any]: ...

    class Connection(Protocol):
        """How an operation runs a named query: the driver's own placeholders, bound
        parameters only (a sequence for positional ones, a mapping for named ones; a name the
        query does not use is ignored)."""

        def execute(self, sql: str, params: Params = ()) -> Cursor: ...

        def executemany(self, sql: str, rows: Iterable[Sequence[object]]) -> object: ...


class Connector(ABC):
    """What a backend writes. Attributes it sets: ``conn`` (its open :class:`Connection`),
    ``q`` (its :class:`NamedQueries`), ``path`` (the address it was opened at), ``files``
    (the local folder of its run logs), ``lockfile`` (the local file of its chunk locks),
    ``identity`` (names the store the same way whatever address reached it) and
    ``version`` (the schema version its migrations reach)."""

    conn: Connection
    q: NamedQueries
    path: Address
    files: str
    lockfile: str
    identity: str
    version: int

    # -- opening and the local files -------------------------------------------------------

    @classmethod
    @abstractmethod
    def open(cls, address: Any, readonly: bool = False) -> Any:
        """Open an existing store at the current schema version; never create one
        (:class:`~dataflow.errors.StoreMissing`, ``NotAStore``, ``StoreVersion``).
        ``readonly``: for a command that only reads."""

    @classmethod
    @abstractmethod
    def create(cls, address: Any) -> tuple[Any, int]:
        """Create or upgrade the store by its migrations (one creator at a time); the open
        store and the number of migrations applied."""

    @classmethod
    @abstractmethod
    def local_name(cls, address: Any) -> str:
        """Where this host keeps the store's own files, as a name that the store's folder
        of run logs (:meth:`files_of`) and file of chunk locks (:meth:`lockfile_of`) are
        named after (the store need not exist)."""

    @classmethod
    def files_of(cls, address: Any) -> str:
        """This host's folder of the store's run logs: its local name with ``.d``."""
        return cls.local_name(address) + ".d"

    @classmethod
    def lockfile_of(cls, address: Any) -> str:
        """This host's file of the store's chunk locks: its local name with ``-locks``,
        apart from the logs (cleaning those never touches it)."""
        return cls.local_name(address) + "-locks"

    @abstractmethod
    def close(self) -> None: ...

    # -- how a query runs ----------------------------------------------------------------

    @abstractmethod
    def transaction(self, pipeline: bool = False) -> AbstractContextManager[None]:
        """A write transaction taken up front: two claimers never read the same free chunk.
        ``pipeline``: statements may be sent without waiting for those before (a claim's,
        a finish's: only their results are waited for), where a store gains by it."""

    @staticmethod
    @abstractmethod
    def marks(count: int) -> str:
        """``count`` positional placeholders of the driver, comma separated (for a query
        with a ``{marks}`` field)."""

    @abstractmethod
    def inserted_id(self, sql: str, params: Params) -> int:
        """Run an INSERT of one row; the id the store gave it (a driver's last row id, or
        the query's ``RETURNING``)."""

    # -- the claim's read, which each backend locks or binds its own way -----------------

    @abstractmethod
    def candidates(
        self, jobid: str, limit: int, after: tuple[str, str] | None = None, lock: bool = True
    ) -> list[tuple[str, str]]:
        """The job's candidates as (sortkey, dataid) in natural order: the first ``limit``
        past the pair ``after`` (a pair as returned, so a row with a wrong key is passed, not
        looped over). A candidate may be stale, or carry a wrong sort key if an outside
        client wrote it; the claim checks each one and drops or repairs it. ``lock``: for a
        claim, inside its transaction (a store whose claims run side by side locks the
        rows); False for a reader, which may be a role that may only read."""

    # -- what a driver error means ---------------------------------------------------------

    @abstractmethod
    def passing(self, exc: BaseException) -> bool:
        """Is ``exc`` a failure of the store that passes if tried again later (busy, a
        connection lost, a server restarting)? A backend adds its driver's to this one's."""
        return getattr(exc, "passing", False)

    @abstractmethod
    def outcome_unknown(self, exc: BaseException) -> bool:
        """Did ``exc`` leave unknown whether the transaction it ended was committed (its
        COMMIT sent, the answer lost with the connection)?"""

    @abstractmethod
    def failure(self, exc: BaseException) -> Exception | None:
        """What an error of the driver says about the store itself (out of reach, full,
        damaged), as one of the toolkit's errors; None when it is about the statement or
        not the driver's."""

    # -- SQL typed by users (utility sql, dml, ddl) -----------------------------------------

    @abstractmethod
    def query(self, sql: str) -> tuple[list[str], list[tuple]]:
        """Run one read-only statement (nothing it does may change the store); returns
        column names and rows."""

    @abstractmethod
    def execute(self, sql: str) -> tuple[list[str], list[tuple], int]:
        """Run one statement in its own write transaction; columns, rows, rows changed."""

    # -- what a backend may change: the defaults suit a store that one host's processes
    # share, whose writers take turns already (SQLite's BEGIN IMMEDIATE) -------------------

    # How long (seconds) a store may fail in a way that passes before a drain gives up on it.
    patience = 60.0

    # What a run's liveness needs (dataflow.run.claim.liveness): "lock", this host's chunk lock
    # and its run's token; "lease" (a :class:`dataflow.store.leases.LeaseStore`), also a
    # run lock and heartbeat every host sees, held by a keeper (dataflow.run.lease.keeper).
    liveness = "lock"

    def clock(self) -> datetime:
        """The store's time now, with its zone, which its hosts share (a file's: this host's)."""
        return datetime.now().astimezone()

    def unhurried(self) -> None:
        """This transaction may idle between its statements: long work of ours is done there."""
        return None

    # Turns, held until the transaction ends: no-ops where writers take turns already;
    # a shared store takes them where the rules need one.

    def job_turn(self, jobid: str) -> None:
        """Wait for the job's turn: claims under ``max_parallel`` count live runs one at a time."""
        return None

    def chunk_turn(self, dataid: str, wait: bool = False) -> bool:
        """The turn of the chunks at ``dataid``: nothing else may change what makes them
        claimable (their claim, finish or recovery, their inputs' offers) until this
        transaction ends. Without ``wait``, False when another transaction has it now."""
        return True

    def chunk_turns(self, dataids: Sequence[str]) -> None:
        """:meth:`chunk_turn` of each, waited for, in an order every transaction keeps."""
        for dataid in sorted(set(dataids)):
            self.chunk_turn(dataid, wait=True)
