"""Where a file dataset's items land, and how they land whole: ``utility drop DATASET
FILE...`` and the items ``utility serve`` takes for a stream.

Spark's file source reads every new file of the folder of a file dataset
(``<base>/<table>``) and ignores names starting with ``.`` or ``_``. A drop copies
each file under such a hidden name, flushes it to disk, then links it under its own
name in one step and flushes the folder: the stream never sees half an item, an item
that landed survives a power cut, and an item already there is never replaced (the
file source would not read it again). ``utility serve`` lands the items POSTed to it
the same way (:func:`place`). Everything is checked
before the first copy, so a mistake drops nothing.

Neutral ground: the command line and the server share it without the Spark package,
and it opens no store. A dataset's landing folder comes from its row of table dataset
(:func:`folder_of`: its ``database``, ``schemaname`` and ``tablename``, as
:mod:`dataflow.layout` reads them); its password is never read.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import BinaryIO

from .errors import DatasetError, DropError
from .layout import file_format, is_file, table_path

Row = Mapping[str, object]  # a dataset's row of table dataset (Store.datasets)


def _text(row: Row, column: str) -> str:
    value = row.get(column)
    return "" if value is None else str(value)


def folder_of(datasetid: str, row: Row | None) -> Path:
    """The local folder of file dataset ``datasetid``, where its items land, from its
    row (None: not registered); a clear error for any other dataset."""
    if row is None:
        raise DatasetError(datasetid, "it is not in table dataset (see 'utility datasets')")
    if not is_file(_text(row, "database")):
        if not _text(row, "hostname"):
            raise DatasetError(
                datasetid,
                "set database to a file format (parquet, csv, json, orc or file:) "
                "or hostname to a database server",
            )
        raise DropError(datasetid, "it is not a file dataset (database: a file format)")
    if not _text(row, "schemaname"):
        raise DatasetError(datasetid, "schemaname (the base path or URI) is empty")
    where = table_path(_text(row, "schemaname"), _text(row, "tablename"))
    if "://" in where and not where.startswith("file:"):
        raise DropError(datasetid, f"its folder {where} is not on this machine's file system")
    return Path(where.removeprefix("file://").removeprefix("file:"))


def format_of(row: Row) -> str:
    """The format a file dataset's files are in (its ``database``: parquet, csv...)."""
    return file_format(_text(row, "database"))


def drop(
    datasetid: str, row: Row | None, files: list[str], roots: list[Path] | None = None
) -> tuple[Path, list[Path]]:
    """Copy ``files`` into the landing folder of ``datasetid`` (its ``row``) under their
    own names; returns the folder and the items as they landed. ``roots``: folders the
    landing folder must be inside (symlinks and ``..`` resolved): a row of the store
    names it."""
    if not files:
        raise DropError(datasetid, "name one or more files")
    folder = folder_of(datasetid, row)
    if roots is not None:
        folder = folder.resolve()
        if not any(folder.is_relative_to(root.resolve()) for root in roots):
            shown = ", ".join(str(root) for root in roots)
            raise DropError(
                datasetid, f"its landing folder {folder} is outside the landing roots ({shown})"
            )
    sources = [Path(name) for name in files]
    seen: set[str] = set()
    for source in sources:
        name = source.name
        if not source.is_file():
            raise DropError(datasetid, f"{source} is not a file")
        if not os.access(source, os.R_OK):
            raise DropError(datasetid, f"{source} cannot be read")
        if name.startswith((".", "_")):
            raise DropError(datasetid, f"{name}: Spark ignores names starting with . or _")
        if name in seen:
            raise DropError(datasetid, f"{name} is named twice")
        if (folder / name).exists():
            raise DropError(datasetid, f"{folder / name} is there already: give it a new name")
        seen.add(name)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise DropError(datasetid, f"cannot create {folder}: {exc.strerror}") from None
    placed: list[Path] = []
    for source in sources:
        try:
            placed.append(_place(datasetid, source, folder))
        except DropError as exc:
            if placed:  # a disk that filled up half-way: say what did land
                done = ", ".join(p.name for p in placed)
                raise DropError(
                    datasetid, f"{exc.args[0].split(': ', 1)[1]} (dropped before it: {done})"
                ) from None
            raise
    return folder, placed


def _place(datasetid: str, source: Path, folder: Path) -> Path:
    target = folder / source.name
    try:
        with open(source, "rb") as into:
            placed = _write_whole(folder, source.name, lambda out: shutil.copyfileobj(into, out))
    except OSError as exc:
        raise DropError(datasetid, f"cannot write {target}: {exc.strerror}") from None
    if not placed:
        raise DropError(datasetid, f"{target} is there already: give it a new name")
    return target


def place(folder: Path, name: str, data: bytes) -> bool:
    """Land ``data`` as item ``folder/name`` as a drop lands a file: written whole under a
    hidden name, flushed to disk, linked under ``name``, the folder flushed too, so that
    once this returns the item survives a crash or a power cut. False if an item of that
    name was there already (nothing is written then; the folder is flushed all the same,
    so that the item there is durable too). Raises OSError."""
    folder.mkdir(parents=True, exist_ok=True)
    return _write_whole(folder, name, lambda out: out.write(data))


def _write_whole(folder: Path, name: str, fill: Callable[[BinaryIO], object]) -> bool:
    handle, hidden = tempfile.mkstemp(dir=folder, prefix=f".{name}.")
    try:
        with os.fdopen(handle, "wb") as out:
            fill(out)
            out.flush()
            os.fsync(out.fileno())
        os.chmod(hidden, 0o644)
        try:
            os.link(hidden, folder / name)  # fails rather than replace an item that landed
            placed = True
        except FileExistsError:
            placed = False
    finally:
        Path(hidden).unlink(missing_ok=True)
    _sync_folder(folder)  # the new name itself survives a power cut
    return placed


def _sync_folder(folder: Path) -> None:
    descriptor = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)
