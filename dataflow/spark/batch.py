"""A batch: chunks of a job claimed together and run as one Spark query, through the
job's ``def run_batch(spark, batch)``. Each chunk stays its own: its own claim, attempt,
log and status; here, its own folder (staged in its own attempt folder when the run
stages its outputs, ``dataflow/layout.py``).

``read(spark, batch.input())`` is one DataFrame over the batch's chunks with a text
column ``dataid`` (the chunk's dataid exactly: ``007`` and ``2026-01-01`` stay text);
``write(frame, batch.output())`` writes each dataid's rows into its own chunk, and
makes every chunk of the batch that got no rows an empty chunk (the schema, no rows),
as a run of that chunk alone would have.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..errors import ChunkMissing, DatasetError, NoSuchJobDataset
from ..layout import batch_staging, chunk_folder, local
from . import jdbc
from .context import JobContext
from .datasets import Dataset

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

SUCCESS = "_SUCCESS"  # the marker Spark's committer leaves in a folder it wrote


@dataclass(frozen=True)
class BatchDataset:
    """One dataset of the job at every chunk of a batch (one :class:`Dataset` each)."""

    datasetid: str
    chunks: tuple[Dataset, ...]

    @property
    def dataids(self) -> tuple[str, ...]:
        return tuple(chunk.dataid for chunk in self.chunks)

    @property
    def kind(self) -> str:
        return self.chunks[0].kind

    def read(
        self, spark: SparkSession, *, schema: Any = None, options: Mapping[str, str] | None = None
    ) -> DataFrame:
        return read(spark, self, schema=schema, options=options)

    def write(self, frame: DataFrame, *, options: Mapping[str, str] | None = None) -> None:
        write(frame, self, options=options)


@dataclass(frozen=True)
class Batch:
    """What ``run_batch(spark, batch)`` gets: the contexts of the chunks it runs, in
    natural order (``batch.chunks``), and their datasets across the batch."""

    chunks: tuple[JobContext, ...]

    @property
    def jobid(self) -> str:
        return self.chunks[0].jobid

    @property
    def dataids(self) -> tuple[str, ...]:
        return tuple(chunk.dataid for chunk in self.chunks)

    def input(self, name: str | None = None) -> BatchDataset:
        """The IN dataset ``name`` at every chunk; without a name, the job's only one."""
        return self._across("IN", name)

    def output(self, name: str | None = None) -> BatchDataset:
        """The OUT dataset ``name`` at every chunk; without a name, the job's only one."""
        return self._across("OUT", name)

    def item(self, name: str, default: str | None = None) -> str | None:
        """A job item (the same for every chunk)."""
        return self.chunks[0].item(name, default)

    def _across(self, direction: str, name: str | None) -> BatchDataset:
        first = self.chunks[0]
        names = sorted(first.inputs if direction == "IN" else first.outputs)
        if name is None and len(names) != 1:
            raise NoSuchJobDataset(self.jobid, direction, name, names)
        pick = (lambda job: job.input(name)) if direction == "IN" else lambda j: j.output(name)
        found = tuple(pick(job) for job in self.chunks)
        return BatchDataset(found[0].datasetid, found)

    def __len__(self) -> int:
        return len(self.chunks)


def read(
    spark: SparkSession,
    batch: BatchDataset,
    *,
    schema: Any = None,
    options: Mapping[str, str] | None = None,
) -> DataFrame:
    """Every chunk of the batch in one DataFrame, with a string column ``dataid``."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import StringType, StructField, StructType

    from .chunks import READ_DEFAULTS
    from .chunks import read as read_chunk

    if batch.kind == "jdbc":  # each chunk's rows, filtered in the database
        frames = [read_chunk(spark, chunk, options=options) for chunk in batch.chunks]
        tagged = [
            f.withColumn("dataid", F.lit(c.dataid))
            for f, c in zip(frames, batch.chunks, strict=True)
        ]
        return _union(tagged)
    first = batch.chunks[0]
    paths = [chunk.chunk_path for chunk in batch.chunks]
    for chunk, path in zip(batch.chunks, paths, strict=True):
        where = local(path)
        if where is not None and not os.path.isdir(where):
            raise ChunkMissing(chunk.datasetid, chunk.dataid, path)
    defaults = {**READ_DEFAULTS.get(first.format, {}), **(options or {})}
    reader = spark.read.format(first.format).options(**defaults)
    if schema is None:  # the chunks' own columns, read without their folder names
        schema = reader.load(paths).schema
    elif isinstance(schema, str):  # parsed, not loaded: no listing of the chunks' files
        schema = _parse_ddl(schema)
    # a partition column the schema names keeps the schema's type: dataids stay text
    fields = [field for field in schema.fields if field.name != "dataid"]
    full = StructType([*fields, StructField("dataid", StringType())])
    return reader.schema(full).option("basePath", first.table_path).load(paths)


def _parse_ddl(text: str) -> Any:
    """The type a DDL string such as ``"id INT, name STRING"`` names."""
    from pyspark.sql.types import DataType

    parse = getattr(DataType, "fromDDL", None)
    if parse is None:  # pyspark 3.5: the parser fromDDL wraps in 4
        from pyspark.sql.types import _parse_datatype_string as parse
    return parse(text)


def _union(frames: list[DataFrame]) -> DataFrame:
    result = frames[0]
    for frame in frames[1:]:
        result = result.unionByName(frame)
    return result


def write(
    frame: DataFrame, batch: BatchDataset, *, options: Mapping[str, str] | None = None
) -> None:
    """Make each dataid's rows of ``frame`` (its column ``dataid``) that chunk of the
    batch, replacing those chunks only; a chunk of the batch without rows becomes empty.
    A row whose dataid is not a chunk of the batch fails the write, before any chunk
    changes."""
    from pyspark.sql import functions as F

    from .chunks import WRITE_DEFAULTS
    from .chunks import write as write_chunk

    if not batch.chunks:
        return
    if "dataid" not in frame.columns:
        raise DatasetError(batch.datasetid, "the batch's frame has no column dataid")
    dataids = list(batch.dataids)
    stray = F.concat(F.lit("a row's dataid is not a chunk of this batch: "), F.col("dataid"))
    known = F.col("dataid").isNotNull() & F.col("dataid").isin(dataids)
    frame = frame.withColumn(
        "dataid", F.when(known, F.col("dataid")).otherwise(F.raise_error(stray))
    )
    if batch.kind == "jdbc":
        jdbc.write(frame, batch.chunks, options or {})
        return
    first = batch.chunks[0]
    writer = frame.write.format(first.format).partitionBy("dataid")
    writer = writer.options(**WRITE_DEFAULTS.get(first.format, {}), **(options or {}))
    if all(chunk.staged for chunk in batch.chunks):
        _write_staged(frame, writer, batch, options or {})
        return
    # written in place: Spark replaces the partitions that get rows (dynamic overwrite)
    writer.mode("overwrite").option("partitionOverwriteMode", "dynamic").save(first.table_path)
    written = {row[0] for row in frame.select("dataid").distinct().collect()}
    empty = frame.drop("dataid").limit(0)
    for chunk in batch.chunks:
        if chunk.dataid not in written:
            write_chunk(empty, chunk, options=options)


def _write_staged(
    frame: DataFrame, writer: Any, batch: BatchDataset, options: Mapping[str, str]
) -> None:
    """Write the batch into a folder of its own beside the chunks' attempt folders, then
    move each dataid's folder into its chunk's attempt folder (its own run's finish
    publishes it, or not)."""
    from .chunks import WRITE_DEFAULTS

    first = batch.chunks[0]
    table = local(first.table_path)
    assert table is not None  # staged: a local path
    folder = batch_staging(table, first.dataid, first.attempt)
    try:
        writer.mode("overwrite").save(folder)
        done = os.path.exists(f"{folder}/{SUCCESS}")
        empty = f"{folder}/_empty"
        for chunk in batch.chunks:
            target = local(chunk.chunk_path)
            assert target is not None
            shutil.rmtree(target, ignore_errors=True)  # an earlier part of this attempt's
            os.makedirs(os.path.dirname(target), exist_ok=True)
            written = f"{folder}/{chunk_folder(chunk.dataid)}"
            if os.path.isdir(written):
                os.rename(written, target)
                if done:
                    open(f"{target}/{SUCCESS}", "wb").close()
                continue
            if not os.path.isdir(empty):  # the schema without rows, written once
                nothing = frame.drop("dataid").limit(0).write.format(first.format)
                nothing = nothing.options(**WRITE_DEFAULTS.get(first.format, {}), **options)
                nothing.mode("overwrite").save(empty)
            shutil.copytree(empty, target)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
