"""The status store: the interface the rest of the toolkit uses, and its backends.

May import: errors, dataids, policy.

``open_store`` and ``create_store`` choose the backend by the store's address: a file
path is :mod:`dataflow.store.sqlite`, a ``postgresql://`` URL :mod:`dataflow.store.postgres`
(its driver, psycopg, is imported only then). A new backend is a subpackage beside them
that subclasses :class:`Store` (:class:`LeaseStore` when its runs need a lease every
host sees) and writes the methods of the seam (:class:`.connector.Connector`), plus one
line in ``_backend`` (docs/development.md, "Adding a backend").
"""

from __future__ import annotations

from .address import check_environment
from .base import (
    DATASET_COLUMNS,
    DRIVER_ERRORS,
    Address,
    ChunkRow,
    JobItem,
    Row,
    Store,
    is_url,
    locate,
    now,
    same_store,
    shown,
)
from .moved import refuse_if_moved

__all__ = [
    "DATASET_COLUMNS",
    "DRIVER_ERRORS",
    "Address",
    "ChunkRow",
    "JobItem",
    "LeaseStore",
    "Row",
    "Store",
    "create_store",
    "files_of",
    "is_url",
    "locate",
    "now",
    "open_store",
    "refuse_if_moved",
    "same_store",
    "shown",
]


def __getattr__(name: str):
    """``LeaseStore``, imported at its first use: a lock's store (SQLite) never needs it."""
    if name == "LeaseStore":
        from .leases import LeaseStore

        return LeaseStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _backend(address: Address) -> type[Store]:
    """The backend class for a store address (imported only when it is used)."""
    if is_url(address):
        from .postgres import backend

        return backend()
    from .sqlite import SqliteStore

    return SqliteStore


def open_store(
    address: Address, readonly: bool = False, retired_ok: bool = False, session: bool = False
) -> Store:
    """Open an existing store at its current schema version; never creates one.
    ``readonly``: for commands that only read (it then opens on a read-only disk too).
    A store that ``copy-store --retire`` retired is refused (:class:`~dataflow.errors.StoreMoved`)
    unless ``retired_ok``: for reading its history, and for ``utility unretire``.
    ``session``: for what needs a session of its own (a keeper's run locks), which goes
    straight to the server when the address is a pooler's (:meth:`LeaseStore.open_session`)."""
    check_environment()
    backend = _backend(address)
    opener = getattr(backend, "open_session", None) if session else None  # LeaseStore's
    store: Store = opener(address) if opener else backend.open(address, readonly)
    if not retired_ok:
        try:
            refuse_if_moved(store)
        except BaseException:
            store.close()
            raise
    return store


def create_store(address: Address) -> tuple[Store, int]:
    """Create or upgrade a store; returns it with the number of migrations applied."""
    check_environment()
    return _backend(address).create(address)


def files_of(address: Address) -> tuple[str, str]:
    """The local folder of the store's run logs and its lock file (the store need not exist)."""
    backend = _backend(address)
    return backend.files_of(address), backend.lockfile_of(address)
