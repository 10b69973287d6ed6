"""The status store: the interface the rest of the toolkit uses, and its backends.

May import: errors, dataids.

``open_store`` and ``create_store`` choose the backend by the store's address; the
only backend today is :mod:`dataflow.store.sqlite` (a file path). A new backend is a
subpackage beside it that subclasses :class:`Store`, plus one line in ``_backend``.
"""

from __future__ import annotations

from pathlib import Path

from .base import DATASET_COLUMNS, DRIVER_ERRORS, ChunkRow, JobItem, Row, Store, locate, now

__all__ = [
    "DATASET_COLUMNS",
    "DRIVER_ERRORS",
    "ChunkRow",
    "JobItem",
    "Row",
    "Store",
    "create_store",
    "files_of",
    "locate",
    "now",
    "open_store",
]


def _backend(address: Path) -> type[Store]:
    """The backend class for a store address (imported only when it is used)."""
    from .sqlite import SqliteStore

    return SqliteStore


def open_store(address: Path, readonly: bool = False) -> Store:
    """Open an existing store at its current schema version; never creates one.
    ``readonly``: for commands that only read (it then opens on a read-only disk too)."""
    return _backend(address).open(address, readonly)


def create_store(address: Path) -> tuple[Store, int]:
    """Create or upgrade a store; returns it with the number of migrations applied."""
    return _backend(address).create(address)


def files_of(address: Path) -> tuple[Path, Path]:
    """The local folder of the store's run logs and its lock file (the store need not exist)."""
    backend = _backend(address)
    return backend.files_of(address), backend.lockfile_of(address)
