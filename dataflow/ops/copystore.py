"""Moving a store: every table, history included, from one store to another (SQLite to
PostgreSQL and back), all or nothing."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ..errors import DataflowError, StoreUnavailable
from ..run.claim import liveness
from ..store import Address, Store, create_store, is_url, moved
from ..store.base import TABLES

SQLITE_SIDE_FILES = ("-wal", "-shm", "-journal")


class TargetNotEmpty(DataflowError):
    def __init__(self, where: str, chunks: int, runs: int):
        super().__init__(
            f"{where} already holds {chunks} status rows and {runs} runs: copy-store would "
            "replace them; add --force to do so"
        )


class SourceLive(DataflowError):
    def __init__(self, live: list[str]):
        shown = "; ".join(live[:5]) + (f"; and {len(live) - 5} more" if len(live) > 5 else "")
        super().__init__(
            f"{len(live)} run{'' if len(live) == 1 else 's'} of this store still live ({shown}): "
            "the copy would take them for dead and run their chunks again; stop the RunJobs "
            "(cron) and copy once they have ended"
        )


def _live(source: Store, runs: list[tuple]) -> list[str]:
    """A person's words for each run of ``source`` a process of which lives: RUNNING
    chunks whose run is alive, and any run whose token a process here carries."""
    chunks = liveness.live_runs(source, source.running())
    names = TABLES["run"]
    rows = [dict(zip(names, run, strict=True)) for run in runs]
    found = {row["runid"] for row in rows if (row["jobid"], row["dataid"]) in chunks}
    found |= liveness.living(source, [row for row in rows if row["status"] != "RUNNING"])
    return [
        f"{row['jobid']} {row['dataid']}: {liveness.where(source, row)}"
        for row in rows
        if row["runid"] in found
    ]


def copy_to(
    source: Store, address: Address, where: str, force: bool, retire: str | None = None
) -> dict[str, int]:
    """``utility copy-store``: every table of ``source`` into the store at ``address``
    (created if need be, at the current schema), replacing what it held, all or nothing,
    its files too (see :func:`staged`); rows copied per table. A source with a live run
    is refused: the target would take the run for dead.

    ``retire`` (a date): mark the source as moved to ``where`` once the target is whole,
    in the source's transaction that read the tables (on SQLite a write transaction: no
    run changes the source in between). A copy that fails leaves the source as it was."""
    if is_url(address) or Path(address).exists():
        target, _ = create_store(address)
        with target:
            check_target(target, where, force)
    with source.transaction():  # one consistent picture of the source
        source.unhurried()  # it waits while the target is written
        tables = {table: source.table_rows(table) for table in TABLES}
        live = _live(source, tables["run"])
        if live:
            raise SourceLive(live)
        with staged(address) as staging:
            target, _ = create_store(staging)
            with target:
                copied = _fill(target, tables, where, force=True)
        if retire:
            moved.retire(source, where, retire)
    return copied


def _fill(target: Store, tables: dict[str, list[tuple]], where: str, force: bool) -> dict[str, int]:
    """Replace every table of ``target`` by ``tables``, in one transaction of the target."""
    copied = {}
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


def check_target(target: Store, where: str, force: bool) -> None:
    """Refuse a target that holds runs or status rows, unless ``force``."""
    with target.transaction():
        chunks, runs = len(target.table_rows("datastatus")), len(target.table_rows("run"))
    if (chunks or runs) and not force:
        raise TargetNotEmpty(where, chunks, runs)


@contextmanager
def staged(address: Address) -> Iterator[Address]:
    """Where to write a copy to ``address``: a server's database as it is (its one
    transaction is all or nothing); for an SQLite file, a new file beside it that is
    renamed over it once the copy is whole and closed. On any failure nothing is left:
    not the new file, nor its -wal, -shm or -journal."""
    if is_url(address):
        yield address
        return
    target = Path(os.path.realpath(address))  # a symlink's file is replaced, not the link
    try:
        handle, name = tempfile.mkstemp(
            dir=target.parent, prefix=f".{target.name}.", suffix=".copy"
        )
        os.close(handle)
        os.unlink(name)  # SQLite creates it
    except OSError as exc:
        why = f"its folder {target.parent} cannot be written ({exc.strerror or exc})"
        raise StoreUnavailable("create", target, why) from None
    staging = Path(name)
    try:
        yield staging
        os.replace(staging, target)
    finally:
        for path in (staging, *(Path(f"{staging}{side}") for side in SQLITE_SIDE_FILES)):
            path.unlink(missing_ok=True)
        for folder in (Path(f"{staging}.d"),):  # made by opening a store, empty
            if folder.is_dir() and not any(folder.iterdir()):
                folder.rmdir()
