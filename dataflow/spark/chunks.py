"""Reading and writing exactly one chunk of a dataset with Spark (and every chunk, for
checks and reports). pyspark is imported only when a DataFrame is needed."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..errors import ChunkMissing
from .datasets import Dataset

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

READ_DEFAULTS = {"csv": {"header": "true"}}
WRITE_DEFAULTS = {"csv": {"header": "true"}}


def read(
    spark: SparkSession,
    dataset: Dataset,
    *,
    schema: Any = None,
    options: Mapping[str, str] | None = None,
) -> DataFrame:
    """Chunk ``dataset.dataid`` of ``dataset``: its folder, or its rows in the database.
    Given a batch's dataset (``batch.input()``), every chunk of the batch, with a text
    column ``dataid`` (:mod:`.batch`).

    ``schema`` (a DDL string or StructType) fixes the columns of a csv or json chunk;
    ``options`` go to Spark's reader (e.g. ``{"sep": ";"}``, ``{"fetchsize": "10000"}``).
    """
    if not isinstance(dataset, Dataset):  # a batch's (it imports this module, not we it)
        return dataset.read(spark, schema=schema, options=options)
    if dataset.kind == "jdbc":
        reader = spark.read.format("jdbc").options(**dataset.jdbc_options())
        return reader.option("dbtable", dataset.chunk_sql()).options(**(options or {})).load()
    reader = spark.read.format(dataset.format)
    reader = reader.options(**READ_DEFAULTS.get(dataset.format, {}), **(options or {}))
    if schema is not None:
        reader = reader.schema(schema)
    path = dataset.chunk_path
    try:
        return reader.load(path)
    except Exception as exc:
        if "PATH_NOT_FOUND" in str(exc) or "Path does not exist" in str(exc):
            raise ChunkMissing(dataset.datasetid, dataset.dataid, path) from None
        raise


def read_all(spark: SparkSession, dataset: Dataset, *, schema: Any = None) -> DataFrame:
    """Every chunk of ``dataset`` with a string column ``dataid`` (for checks and reports)."""
    from pyspark.sql import functions as F

    if dataset.kind == "jdbc":
        reader = spark.read.format("jdbc").options(**dataset.jdbc_options())
        df = reader.option("dbtable", dataset.source_sql()).load()
        return df.withColumn("dataid", F.col(dataset.chunk_column).cast("string"))
    reader = spark.read.format(dataset.format).options(**READ_DEFAULTS.get(dataset.format, {}))
    if schema is not None:
        reader = reader.schema(schema)
    # keep dataids as written ("007" stays "007", not the number 7)
    key = "spark.sql.sources.partitionColumnTypeInference.enabled"
    before = spark.conf.get(key)
    spark.conf.set(key, "false")
    try:
        return reader.load(dataset.table_path)
    finally:
        spark.conf.set(key, before)


def write(df: DataFrame, dataset: Dataset, *, options: Mapping[str, str] | None = None) -> None:
    """Make ``df`` chunk ``dataset.dataid`` of ``dataset``, replacing that chunk only.

    Rerunning or resubmitting a job rewrites its chunk and never touches another one:
    a file chunk's folder is overwritten (a ``dataid`` column is not stored: the folder
    name holds it); a JDBC chunk's rows are replaced by ``df`` with the chunk column set
    to the dataid (fenced by the run's attempt under RunJob, :mod:`.jdbc`). If the write
    fails half-way the run is FAILED, so nobody reads the chunk, and the rerun replaces
    it again.

    Given a batch's dataset (``batch.output()``), each dataid's rows of ``df`` (its
    column ``dataid``) become that chunk, and a chunk of the batch without rows becomes
    empty (:mod:`.batch`).
    """
    if not isinstance(dataset, Dataset):
        dataset.write(df, options=options)
        return
    if dataset.kind == "jdbc":
        _write_jdbc(df, dataset, options or {})
        return
    if "dataid" in df.columns:
        df = df.drop("dataid")
    writer = df.write.mode("overwrite").format(dataset.format)
    writer = writer.options(**WRITE_DEFAULTS.get(dataset.format, {}), **(options or {}))
    writer.save(dataset.chunk_path)


def _write_jdbc(df: DataFrame, dataset: Dataset, options: Mapping[str, str]) -> None:
    from pyspark.sql import functions as F

    from . import jdbc

    jdbc.write(df.withColumn("dataid", F.lit(dataset.dataid)), (dataset,), options)
