"""The store's interface: every operation the rest of the toolkit may ask of a store.

Domain code (claim and finish rules, operator commands) calls these named
operations and never sees SQL or a driver; a backend (``dataflow.store.sqlite``)
implements each of them. A second backend subclasses :class:`Store` beside it.
Every operation that writes runs inside the caller's :meth:`Store.transaction`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections import namedtuple
from collections.abc import Iterable, Sequence
from contextlib import AbstractContextManager
from datetime import datetime
from pathlib import Path

from .address import Address, busy_timeout, is_url, liveness_timeout, locate, same_store, shown  # noqa: F401 (the interface's names)
from .columns import DATASET_COLUMNS, TABLES  # noqa: F401 (the interface's names)
from .records import Records, Row

# named tuples, not dataclasses: see run.claim.settings.Settings
JobItem = namedtuple("JobItem", "itemtype datasetid itemvalue")  # one row of table job
ChunkRow = namedtuple("ChunkRow", "datasetid locktype status")  # a job's datastatus row


def capped(items: Sequence[JobItem]) -> bool:
    """Has the job a ``max_parallel`` row (set or not: see run.claim.settings.Settings)?"""
    return any(item.itemtype == "max_parallel" for item in items)


# Exception classes of loaded backends' drivers: the CLI reports them as store errors.
DRIVER_ERRORS: list[type[Exception]] = []


def now() -> str:
    """Local time as the seed stores it: ``YYYY-MM-DD HH:MM:SS.ffffff``."""
    return datetime.now().strftime("%Y-%m-%d %H:%M:%S.%f")


def zoned_now() -> str:
    """Local time with its UTC offset, ``YYYY-MM-DD HH:MM:SS.ffffff+HH:MM``: the run
    history's times, which two hosts or a change of daylight saving time must not mix up."""
    return datetime.now().astimezone().isoformat(sep=" ", timespec="microseconds")


class Store(Records, ABC):
    """An open store. ``files`` is the local folder of its run logs, ``lockfile`` the
    local file of its chunk locks, ``identity`` names the store the same way whatever
    address reached it, ``version`` is the schema version it is at."""

    path: Address
    files: Path
    lockfile: Path
    identity: str
    version: int
    # How long (seconds) a store may fail in a way that passes (busy, a connection lost, a
    # server restarting) before a drain gives up on it.
    patience = 60.0

    def clock(self) -> datetime:
        """The store's time now, with its zone, which its hosts share (a file's: this host's)."""
        return datetime.now().astimezone()

    def passing(self, exc: BaseException) -> bool:
        """Is ``exc`` a failure of the store that passes if tried again later?"""
        return getattr(exc, "passing", False)

    def outcome_unknown(self, exc: BaseException) -> bool:
        """Did ``exc`` leave unknown whether the transaction it ended was committed (its
        COMMIT sent, the answer lost with the connection)? Not on a store in a file."""
        return False

    # What a run's liveness needs (dataflow.run.claim.liveness): "lock", this host's chunk lock
    # and its run's token; "lease" (a :class:`dataflow.store.leases.LeaseStore`), also a
    # run lock and heartbeat every host sees, held by a keeper (dataflow.run.lease.keeper).
    liveness = "lock"

    @abstractmethod
    def close(self) -> None: ...

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @abstractmethod
    def transaction(self, pipeline: bool = False) -> AbstractContextManager[None]:
        """A write transaction taken up front: two claimers never read the same free chunk.
        ``pipeline``: statements may be sent without waiting for those before (a claim's,
        a finish's: only their results are waited for), where a store gains by it."""

    def unhurried(self) -> None:
        """This transaction may idle between its statements: long work of ours is done there."""
        return None

    # Turns, held until the transaction ends: no-ops where writers take turns already
    # (SQLite's BEGIN IMMEDIATE); a shared store takes them where the rules need one.

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

    # -- registration: tables dataset and job ------------------------------------------

    @abstractmethod
    def job_items(self, jobid: str) -> list[JobItem]:
        """A job's rows of table ``job``, in the order they were registered."""

    @abstractmethod
    def datasets(self, ids: Iterable[str] | None = None) -> dict[str, Row]:
        """Dataset rows by datasetid: the given ones, or all."""

    @abstractmethod
    def jobs(self) -> list[Row]:
        """Every row of table ``job``, by jobid."""

    @abstractmethod
    def job_rows(self) -> list[Row]:
        """Every job's rows of table ``job`` without its timestamp (for export); here and
        in ``job_ids`` not those of the store-wide pseudo-job ``*`` (its settings)."""

    @abstractmethod
    def job_ids(self) -> list[str]: ...

    @abstractmethod
    def put_dataset(self, row: Row) -> None:
        """Insert or replace a dataset row."""

    @abstractmethod
    def delete_dataset(self, datasetid: str) -> int: ...

    @abstractmethod
    def put_job(self, jobid: str, items: Iterable[tuple[str, str | None, str | None]]) -> None:
        """Replace a job's rows with (itemtype, datasetid, itemvalue) items."""

    @abstractmethod
    def delete_job(self, jobid: str) -> int: ...

    @abstractmethod
    def jobs_using(self, datasetid: str, itemtype: str) -> list[str]:
        """Jobs that list the dataset as IN (consumers) or OUT (producers)."""

    @abstractmethod
    def passwords(self) -> list[tuple[str, str]]:
        """(datasetid, encryptedpass) of every dataset with a stored password."""

    @abstractmethod
    def set_password(self, datasetid: str, token: str) -> None: ...

    # -- the claim ---------------------------------------------------------------------

    @abstractmethod
    def candidates(
        self, jobid: str, limit: int, after: tuple[str, str] | None = None
    ) -> list[tuple[str, str]]:
        """The job's candidates as (sortkey, dataid) in natural order: the first ``limit``
        past the pair ``after``. A candidate may be stale, or carry a wrong sort key if an
        outside client wrote it; the claim checks each one and drops or repairs it."""

    def job_and_candidates(self, jobid: str, limit: int, inputs: Sequence[str]) -> tuple:
        """:meth:`job_items`, and the first ``limit`` :meth:`candidates` (None for a job
        with a ``max_parallel`` row: its claim takes the job's turn before it asks). A store
        may read them and their :meth:`chunk_facts` with ``inputs`` in one round trip."""
        items = self.job_items(jobid)
        return items, None if capped(items) else self.candidates(jobid, limit)

    @abstractmethod
    def drop_candidate(self, jobid: str, sortkey: str, dataid: str) -> None: ...

    @abstractmethod
    def put_candidate(self, jobid: str, dataid: str) -> None:
        """Offer a dataid to a job, under its natural sort key."""

    @abstractmethod
    def count_candidates(self, jobid: str) -> int: ...

    @abstractmethod
    def ready_inputs(self, datasetids: Sequence[str], dataid: str) -> int:
        """How many of these datasets have a READY output row at ``dataid``."""

    @abstractmethod
    def chunk_rows(self, jobid: str, dataid: str) -> list[ChunkRow]:
        """The job's own datastatus rows (OUT and IN) at ``dataid``."""

    def chunk_facts(
        self, jobid: str, inputs: Sequence[str], dataids: Sequence[str]
    ) -> list[tuple[list[ChunkRow], Row | None, int]]:
        """What a claim reads of each chunk: the job's rows there, the chunk's last run
        and how many of ``inputs`` are READY there (a store may ask for all at once)."""
        return [
            (self.chunk_rows(jobid, d), self.last_run(jobid, d), self.ready_inputs(inputs, d))
            for d in dataids
        ]

    @abstractmethod
    def mark_running(
        self, jobid: str, dataid: str, outputs: Sequence[str], inputs: Sequence[str]
    ) -> None:
        """Record a claim: OUT/RUNNING for each output, IN/RUNNING for each input."""

    def record_claims(
        self,
        jobid: str,
        taken: Sequence[tuple[str, str]],
        outputs: Sequence[str],
        inputs: Sequence[str],
        runs: Sequence[dict[str, object]],
    ) -> list[int]:
        """Record the claims of these (sortkey, dataid) candidates, locked: each one
        dropped, its rows RUNNING (:meth:`mark_running`), its history row (``runs``, in
        the same order) inserted; their runids (a store may write each part of all the
        claims in one statement)."""
        for key, dataid in taken:
            self.drop_candidate(jobid, key, dataid)  # the triggers know exact keys only
            self.mark_running(jobid, dataid, outputs, inputs)
        return self.start_runs(runs)

    @abstractmethod
    def finish(self, jobid: str, dataid: str, status: str) -> tuple[int, int]:
        """Set the job's OUT rows at ``dataid`` to ``status``, delete its IN rows; both counts."""

    @abstractmethod
    def set_out_status(self, jobid: str, dataid: str, status: str) -> int: ...

    @abstractmethod
    def put_out_status(
        self, jobid: str, dataid: str, datasetids: Sequence[str], status: str
    ) -> int:
        """Create or set OUT rows of ``jobid`` at ``dataid`` to ``status``; rows changed."""

    @abstractmethod
    def readers(self, datasetids: Sequence[str], dataid: str) -> list[str]:
        """Jobs holding an IN row on one of these datasets at ``dataid`` (reading it)."""

    @abstractmethod
    def release_claim(
        self, jobid: str, dataid: str, runid: int, previous: Sequence[ChunkRow]
    ) -> None:
        """Undo a claim: the job's rows at ``dataid`` back to ``previous``, its history
        row ``runid`` deleted."""

    @abstractmethod
    def delete_chunk(self, jobid: str, dataid: str) -> int:
        """Delete every datastatus row of the job at ``dataid``."""

    @abstractmethod
    def running(self, jobid: str | None = None) -> list[tuple[str, str]]:
        """(jobid, dataid) of every chunk whose OUT rows say RUNNING."""

    @abstractmethod
    def count_running(self, jobid: str) -> int:
        """How many chunks of the job say RUNNING."""

    # -- hold / release ------------------------------------------------------------------

    @abstractmethod
    def held(self, jobid: str, dataid: str) -> list[Row]: ...

    @abstractmethod
    def hold_chunk(
        self, jobid: str, dataid: str, previous: Sequence[tuple[str, str | None]]
    ) -> None:
        """Freeze a chunk: remember each output's previous status, set it to HOLD."""

    @abstractmethod
    def release_chunk(self, jobid: str, dataid: str) -> list[tuple[str, str | None]]:
        """Unfreeze a chunk: restore (or delete) each output row; returns what was restored."""

    # -- run history ---------------------------------------------------------------------

    @abstractmethod
    def last_run(self, jobid: str, dataid: str) -> Row | None: ...

    @abstractmethod
    def start_run(self, **run: object) -> int:
        """Insert a RUNNING history row; returns its runid."""

    def start_runs(self, runs: Sequence[dict[str, object]]) -> list[int]:
        """:meth:`start_run` of each (a store may send them all before reading any)."""
        return [self.start_run(**run) for run in runs]

    @abstractmethod
    def end_run(self, runid: int, status: str, **outcome: object) -> tuple[bool, str | None]:
        """Close a RUNNING history row: its status, end time and how it ended. False if
        it was not RUNNING any more (recovered, or ended by hand): fenced off. Also the
        rerun asked of the run while it ran (:meth:`request_rerun`), if any."""

    @abstractmethod
    def abandon_runs(self, jobid: str, dataid: str, reason: str) -> None:
        """Close the RUNNING history rows of a chunk whose run died."""

    @abstractmethod
    def note_runs(self, runids: Sequence[int], note: str) -> None:
        """Add ``note`` to the reason of these history rows, after what it says."""

    @abstractmethod
    def request_rerun(self, jobid: str, dataid: str, why: str) -> int:
        """Ask the chunk's live run to end in RESUBMIT instead of READY; runs marked."""

    @abstractmethod
    def history(self, jobid: str | None, dataid: str | None, limit: int) -> list[Row]:
        """Run history, newest first, optionally for one job or one chunk."""

    @abstractmethod
    def run_log(self, jobid: str, dataid: str, attempt: int | None) -> Row | None:
        """The history row of one attempt (the last one when ``attempt`` is None)."""

    @abstractmethod
    def last_failure(self, jobid: str) -> Row | None:
        """The newest failed run whose chunk is still FAILED (fixed ones do not count)."""

    @abstractmethod
    def purgeable_runs(self, jobid: str | None, before: str | None) -> list[Row]:
        """History rows that may go: ended, older than ``before``, and not the last run
        of a FAILED chunk (its retry count gates automatic reruns)."""

    @abstractmethod
    def delete_runs(self, runids: list[int]) -> int: ...

    # -- views -----------------------------------------------------------------------------

    @abstractmethod
    def runs(self, limit: int = 20) -> list[Row]:
        """The newest OUT rows, newest first."""

    @abstractmethod
    def board(self, jobid: str | None = None) -> list[Row]:
        """Per registered job and dataid: the status of its OUT rows and its last run."""

    @abstractmethod
    def newest_dataids(self, jobid: str, limit: int) -> tuple[list[str], list[str]]:
        """Dataids of a job's newest ``limit`` OUT rows in natural order, read from an
        index; and those of its rows the store cannot order (all of them)."""

    @abstractmethod
    def board_at(self, dataids: Sequence[str]) -> list[Row]:
        """As :meth:`board`, at these dataids only."""

    @abstractmethod
    def status_counts(self) -> list[Row]:
        """Chunks per registered job and OUT status."""

    @abstractmethod
    def chunk_of_dataset(self, datasetid: str, dataid: str) -> list[Row]:
        """Every datastatus row of one dataset at one dataid (producers and consumers)."""

    @abstractmethod
    def out_status(self, jobid: str, dataid: str) -> list[tuple[str, str]]:
        """(datasetid, status) of a job's OUT rows at a dataid."""

    @abstractmethod
    def dataids_of_job(self, jobid: str, statuses: tuple[str, ...] = ()) -> list[str]:
        """The dataids at which a job has OUT rows (optionally only with these statuses)."""

    @abstractmethod
    def waiting_upstream(self, datasetid: str) -> list[Row]:
        """Rows of a dataset that are not READY: chunks a consumer is waiting for."""

    # -- whole tables (utility copy-store) -------------------------------------------------

    @abstractmethod
    def table_rows(self, table: str) -> list[tuple]:
        """Every row of one of :data:`TABLES`, its columns in that order, in key order
        (job rows in the order they were registered)."""

    @abstractmethod
    def replace_rows(self, table: str, rows: Iterable[Sequence[object]]) -> None:
        """Replace every row of one of :data:`TABLES` (inside the caller's transaction)."""

    # -- SQL typed by users ------------------------------------------------------------------

    @abstractmethod
    def query(self, sql: str) -> tuple[list[str], list[tuple]]:
        """Run one read-only statement; returns column names and rows."""

    @abstractmethod
    def execute(self, sql: str) -> tuple[list[str], list[tuple], int]:
        """Run one statement in its own write transaction; columns, rows, rows changed."""
