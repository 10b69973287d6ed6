"""Where a file dataset's chunks live, and how a run's output becomes its chunk.

Chunk ``d`` of a file dataset is the folder ``<base>/<table>/dataid=<d>`` (Spark's
partition layout). A run writes it with ``dataflow.spark`` into a folder of its own
attempt, ``<base>/<table>/_attempts/dataid=<d>/run=<token>`` (Spark skips names that
start with ``_`` when it lists a table), and the run's finish moves that folder into
place in the store transaction that checks the run still owns the chunk. A run that
was fenced never publishes: a writer that goes on after its chunk was taken from it
writes only into its own attempt folder.

Publishing is done by the finishing process with the local file system, so only
local paths (plain, or ``file:``) are staged; an ``hdfs://`` or ``s3a://`` chunk is
written in place.
"""

from __future__ import annotations

import contextlib
import os
from collections import namedtuple
from collections.abc import Iterable, Mapping

FORMATS = ("parquet", "csv", "json", "orc")
DEFAULT_FORMAT = "parquet"  # what the seed's ``file:`` means
ATTEMPTS = "_attempts"
# Spark's own escaping of partition values in paths (ExternalCatalogUtils.escapePathName)
_PATH_SPECIAL = set("\"#%'*/:=?\\\x7f{[]^") | {chr(c) for c in range(1, 32)}
_SCHEME = r"[A-Za-z][A-Za-z0-9+.-]*://"


class PublishFailed(OSError):
    """The run's output could not be moved into its chunk (the run ends FAILED)."""


def chunk_folder(dataid: str) -> str:
    """``dataid=<d>`` with the characters Spark escapes in partition folders escaped."""
    return "dataid=" + "".join(f"%{ord(c):02X}" if c in _PATH_SPECIAL else c for c in dataid)


def is_file(database: str) -> bool:
    """Does a dataset's ``database`` column name a file format?"""
    return database.strip().lower() in (*FORMATS, "file:", "file")


def file_format(database: str) -> str:
    """The format of a file dataset's files, from its ``database`` column."""
    database = database.strip().lower()
    return database if database in FORMATS else DEFAULT_FORMAT


def table_path(schemaname: str, tablename: str) -> str:
    """``<base>/<table>``: the folder holding every chunk (``s3a://``, ``hdfs://`` kept)."""
    base = schemaname.rstrip("/") or "/"
    table = tablename.strip("/")
    return f"{base.rstrip('/')}/{table}" if table else base


def local(path: str) -> str | None:
    """The local file system path of ``path`` (itself, or a ``file:`` URI's); None for
    another scheme."""
    if path.startswith("file://"):
        return path[len("file://") :] or None
    if path.startswith("file:"):
        return path[len("file:") :] or None
    import re

    return None if re.match(_SCHEME, path) else path


def staging(table: str, dataid: str, token: str) -> str:
    """The folder attempt ``token`` writes chunk ``dataid`` of ``table`` into."""
    return f"{table}/{ATTEMPTS}/{chunk_folder(dataid)}/run={token}"


def batch_staging(table: str, dataid: str, token: str) -> str:
    """The folder a batch whose first chunk is ``dataid`` (attempt ``token``) writes into
    before each chunk's rows move to that chunk's attempt folder: beside the first
    chunk's, so that its publish or discard removes what a batch killed midway left."""
    return f"{table}/{ATTEMPTS}/{chunk_folder(dataid)}/batch={token}"


_TABLE_COLUMNS = ("database", "schemaname", "tablename")  # where a file dataset lives


def output_tables(outputs: Iterable[str], variables: Mapping[str, str]) -> list[str]:
    """The local folders of the file datasets among ``outputs``, from a job's variables."""
    rows = ({c: variables.get(f"{n}_{c}", "") for c in _TABLE_COLUMNS} for n in outputs)
    return dataset_tables(rows)


def dataset_tables(rows: Iterable[Mapping[str, object]]) -> list[str]:
    """The local folders of the file datasets among these dataset rows."""
    found = []
    for row in rows:
        database, base, table = (str(row[column] or "") for column in _TABLE_COLUMNS)
        if is_file(database) and base and (path := local(table_path(base, table))) is not None:
            found.append(path)
    return found


class Publication(
    namedtuple(
        "Publication",
        [
            "aside",  # list[str]
            "moves",  # list[tuple[str, str]]
        ],
    )
):
    """What a publish did: ``aside``, what the chunks held before and the folders of
    older attempts (a late writer's), to :func:`remove` once the finish is committed;
    ``moves``, its renames (from, to) in order, for :func:`unpublish`."""

    __slots__ = ()


def publish(tables: Iterable[str], dataid: str, token: str) -> Publication:
    """Move attempt ``token``'s output of chunk ``dataid`` into place in each of
    ``tables`` (those it wrote), with renames only: it runs inside the finish's
    transaction, which has checked that the run still owns the chunk. What the chunks
    held before, older attempts' folders and what earlier finishes left aside, are moved
    aside. A failure puts back what was moved and raises PublishFailed: the run is not
    recorded READY."""
    done = Publication([], [])

    def move(path: str, to: str) -> None:
        os.rename(path, to)
        done.moves.append((path, to))

    try:
        for table in tables:
            staged = staging(table, dataid, token)
            if not os.path.isdir(staged):
                continue  # this run wrote nothing there through dataflow.spark
            final = chunk_path(table, dataid)
            trash = f"{os.path.dirname(staged)}/old-{token}"
            if os.path.lexists(final):
                move(final, trash)
            move(staged, final)
            done.aside.append(trash)
            for number, older in enumerate(_listing(os.path.dirname(staged))):
                if _left_over(os.path.basename(older), token):
                    with contextlib.suppress(OSError):
                        move(older, f"{trash}.{number}")
                        done.aside.append(f"{trash}.{number}")
    except OSError as exc:
        unpublish(done.moves)
        where = exc.filename or dataid
        raise PublishFailed(f"cannot publish chunk {dataid} ({where}: {exc.strerror})") from None
    return done


def _left_over(name: str, token: str) -> bool:
    """Is the folder ``name`` beside the attempt ``token`` publishes one to move aside with
    what the chunk held: a late writer's attempt, or what a finish or a recovery had set
    aside and a crash kept it from deleting once committed?"""
    return name.startswith(("run=", "batch=", "old-", "gone-")) and name != f"old-{token}"


def unpublish(moves: list[tuple[str, str]]) -> None:
    """Undo a publish's renames, the last first: the chunks hold what they held before
    and the attempt its output (a finish that did not commit)."""
    while moves:
        path, to = moves.pop()
        with contextlib.suppress(OSError):
            os.rename(to, path)


def remove(paths: Iterable[str]) -> None:
    """Delete what a publish moved aside, then the attempt folders it leaves empty."""
    paths = list(paths)
    if not paths:  # (a chunk that held no folder: shutil, bz2 and lzma cost ~2 ms to import)
        return
    import shutil

    for path in paths:
        shutil.rmtree(path, ignore_errors=True)
        _prune(os.path.dirname(path))


def restore(tables: Iterable[str], dataid: str, token: str) -> None:
    """Attempt ``token`` is recovered as dead, never READY: if its finish moved its
    output into the chunk (and what the chunk held aside), put the chunk back as it was,
    its output back into its attempt folder (for :func:`discard`)."""
    for table in tables:
        staged = staging(table, dataid, token)
        trash = f"{os.path.dirname(staged)}/old-{token}"
        final = chunk_path(table, dataid)
        with contextlib.suppress(OSError):
            if os.path.lexists(trash):
                if os.path.lexists(final) and not os.path.lexists(staged):
                    os.rename(final, staged)
                if not os.path.lexists(final):
                    os.rename(trash, final)


def set_aside(tables: Iterable[str], dataid: str, token: str) -> None:
    """Attempt ``token`` of chunk ``dataid`` died (it is recovered): rename its folders
    to ``gone-`` names, in the recovery's transaction, for :func:`discard` to delete
    once the recovery is committed. A crash between the two leaves them to the chunk's
    next finish, which deletes them with its own (a recovery rolled back left its run
    dead: the next recovery of the chunk deletes them)."""
    for table in tables:
        for path in (staging(table, dataid, token), batch_staging(table, dataid, token)):
            with contextlib.suppress(OSError):
                os.rename(path, f"{os.path.dirname(path)}/gone-{os.path.basename(path)}")


def discard(tables: Iterable[str], dataid: str, token: str) -> None:
    """Delete attempt ``token``'s folders of chunk ``dataid`` (it failed, was fenced or
    died), and what recoveries of the chunk set aside and a crash kept them from
    deleting."""
    for table in tables:
        staged = staging(table, dataid, token)
        folder = os.path.dirname(staged)
        gone = [path for path in _listing(folder) if os.path.basename(path).startswith("gone-")]
        remove([staged, batch_staging(table, dataid, token), *gone])


def chunk_path(table: str, dataid: str) -> str:
    """The folder of chunk ``dataid`` of ``table``."""
    return f"{table}/{chunk_folder(dataid)}"


def _prune(attempts: str) -> None:
    """Remove ``<table>/_attempts/dataid=<d>`` and ``<table>/_attempts`` if empty."""
    for empty in (attempts, os.path.dirname(attempts)):
        try:
            os.rmdir(empty)
        except OSError:
            return  # not empty (another attempt, another chunk), or gone


def _listing(folder: str) -> list[str]:
    try:
        return [os.path.join(folder, name) for name in os.listdir(folder)]
    except OSError:
        return []
