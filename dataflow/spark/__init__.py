"""The PySpark side of a job: which chunk it works on, and where each dataset's chunk lives.

A job run by ``RunJob ./job.py`` (through spark-submit) does::

    from dataflow.spark import context, read, write

    ctx = context()                          # dataid, jobid, datasets: from the environment
    spark = ctx.session()
    orders = read(spark, ctx.input())        # exactly chunk ctx.dataid of the input
    write(orders.dropDuplicates(), ctx.output())  # replaces that chunk of the output, only it

A dataset row maps to a Spark source or sink (see docs/spark.md):

- file dataset: ``database`` is the format (parquet, csv, json, orc; the seed's ``file:``
  means parquet), ``schemaname`` the base path or URI, ``tablename`` the folder; chunk d
  lives in ``<base>/<table>/dataid=<d>`` (Spark's partition layout, so the whole dataset
  reads back as one table with a ``dataid`` column);
- JDBC dataset: ``hostname`` is ``host[:port]`` (PostgreSQL) or a ``jdbc:...://host[:port]``
  URL prefix, ``database`` the database, ``schemaname.tablename`` the table (or
  ``tablename`` a ``SELECT`` query), ``username`` and the password the credentials; chunk d
  is the rows whose chunk column equals d. The chunk column is ``dataid`` unless the job
  has an item ``<dataset>_dataid_column`` or ``dataid_column`` naming another.

pyspark is imported only when a session or a DataFrame is needed.

This package is the job side, on its own beside the run and store packages:
``datasets`` (where a chunk lives), ``context`` (what RunJob told the job),
``chunks`` (read and write one chunk), ``batch`` (many chunks of a job as one query:
``def run_batch(spark, batch)``, ``read(spark, batch.input())`` with a text ``dataid``
column, ``write(frame, batch.output())`` into each dataid's own chunk), ``engine`` (a
job's ``run(spark, job)`` or ``run_batch`` called in one SparkSession), ``streaming`` (a stream's micro-batches as chunks),
``landing`` (``drop``: items into a stream's landing folder, as ``dataflow.landing``
lands them), ``jdbc``, ``pipeline`` and ``testing``.

May import: errors, crypto, store, layout, landing.
"""

from ..layout import DEFAULT_FORMAT, FORMATS
from .batch import Batch, BatchDataset
from .chunks import READ_DEFAULTS, WRITE_DEFAULTS, read, read_all, write
from .context import JobContext, context, registered
from .datasets import (
    CHUNK_COLUMN,
    CHUNK_COLUMN_ITEM,
    JDBC_DRIVERS,
    Dataset,
    chunk_folder,
)
from .landing import drop
from .streaming import StreamChunk, stream

__all__ = [
    "CHUNK_COLUMN",
    "CHUNK_COLUMN_ITEM",
    "DEFAULT_FORMAT",
    "FORMATS",
    "JDBC_DRIVERS",
    "READ_DEFAULTS",
    "WRITE_DEFAULTS",
    "Batch",
    "BatchDataset",
    "Dataset",
    "JobContext",
    "StreamChunk",
    "chunk_folder",
    "context",
    "drop",
    "read",
    "read_all",
    "registered",
    "stream",
    "write",
]
