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

import os
import re
import shutil
from collections.abc import Iterable, Mapping

FORMATS = ("parquet", "csv", "json", "orc")
DEFAULT_FORMAT = "parquet"  # what the seed's ``file:`` means
ATTEMPTS = "_attempts"
MARKER = "_ATTEMPT"  # in a published chunk: the attempt that wrote it (Spark skips "_" files)
# Spark's own escaping of partition values in paths (ExternalCatalogUtils.escapePathName)
_PATH_SPECIAL = set("\"#%'*/:=?\\\x7f{[]^") | {chr(c) for c in range(1, 32)}
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")


class PublishFailed(OSError):
    """The run's output could not be moved into its chunk (the run ends FAILED)."""


def chunk_folder(dataid: str) -> str:
    """``dataid=<d>`` with the characters Spark escapes in partition folders escaped."""
    return "dataid=" + "".join(f"%{ord(c):02X}" if c in _PATH_SPECIAL else c for c in dataid)


def is_file(database: str) -> bool:
    """Does a dataset's ``database`` column name a file format?"""
    return database.strip().lower() in (*FORMATS, "file:", "file")


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
    return None if _SCHEME.match(path) else path


def staging(table: str, dataid: str, token: str) -> str:
    """The folder attempt ``token`` writes chunk ``dataid`` of ``table`` into."""
    return f"{table}/{ATTEMPTS}/{chunk_folder(dataid)}/run={token}"


def output_tables(outputs: Iterable[str], variables: Mapping[str, str]) -> list[str]:
    """The local folders of the file datasets among ``outputs``, from a job's variables."""
    found = []
    for name in outputs:
        base = variables.get(f"{name}_schemaname", "")
        if is_file(variables.get(f"{name}_database", "")) and base:
            path = local(table_path(base, variables.get(f"{name}_tablename", "")))
            if path is not None:
                found.append(path)
    return found


def publish(tables: Iterable[str], dataid: str, token: str, attempt: int) -> int:
    """Move attempt ``token``'s output of chunk ``dataid`` into place in each of
    ``tables`` (those it wrote); how many it moved. A chunk that a later attempt has
    published already is left alone. Called inside the finish's transaction: a failure
    raises PublishFailed and the run is not recorded READY."""
    moved = 0
    for table in tables:
        staged = staging(table, dataid, token)
        if not os.path.isdir(staged):
            continue  # this run wrote no output there through dataflow.spark
        final = f"{table}/{chunk_folder(dataid)}"
        aside = f"{staged}.replaced"
        try:
            if _attempt_of(final) > attempt:
                discard([table], dataid, token)
                continue
            with open(os.path.join(staged, MARKER), "w") as marker:
                marker.write(f"{attempt}\n")
            if os.path.lexists(final):
                os.rename(final, aside)
            try:
                os.rename(staged, final)
            except OSError:
                if os.path.lexists(aside):
                    os.rename(aside, final)
                raise
        except OSError as exc:
            raise PublishFailed(f"cannot publish {staged} as {final}: {exc.strerror}") from None
        moved += 1
        discard([table], dataid)
    return moved


def discard(tables: Iterable[str], dataid: str, token: str | None = None) -> None:
    """Delete attempt ``token``'s folders of chunk ``dataid`` (None: every attempt's,
    once the chunk is published: a late writer of an older one may not come back)."""
    for table in tables:
        attempts = f"{table}/{ATTEMPTS}/{chunk_folder(dataid)}"
        doomed = [staging(table, dataid, token)] if token else _listing(attempts)
        for path in doomed:
            shutil.rmtree(path, ignore_errors=True)
            shutil.rmtree(f"{path}.replaced", ignore_errors=True)
        for empty in (attempts, f"{table}/{ATTEMPTS}"):
            try:
                os.rmdir(empty)
            except OSError:
                break  # not empty (another chunk's attempts), or gone


def _listing(folder: str) -> list[str]:
    try:
        return [os.path.join(folder, name) for name in os.listdir(folder)]
    except OSError:
        return []


def _attempt_of(chunk: str) -> int:
    try:
        with open(os.path.join(chunk, MARKER)) as marker:
            return int(marker.read().strip() or 0)
    except (OSError, ValueError):
        return 0
