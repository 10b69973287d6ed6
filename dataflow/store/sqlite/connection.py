"""The SQLite connection: how it is opened (busy timeout, durability, our SQL functions,
text that may not be UTF-8) and how a migration script is split into statements."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

from ...dataids import natural_key
from ...errors import StoreMissing
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


def connect(path: Path, mode: str) -> sqlite3.Connection:
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
        if not path.exists() and mode == "rwc":
            raise access.create_failure(path, exc) from None
        if not path.exists():
            raise StoreMissing(str(path)) from None
        raise access.open_failure(path, exc, reading=mode == "ro") from None
    conn.row_factory = sqlite3.Row
    conn.text_factory = _text
    conn.create_function("now", 0, now)
    conn.create_function("dataflow_natkey", 1, natural_key, deterministic=True)
    return conn


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


def marks(count: int) -> str:
    """``count`` placeholders of this driver, comma separated."""
    return ", ".join("?" * count)
