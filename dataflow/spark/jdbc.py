"""Statements Spark's JDBC sink cannot issue (emptying one chunk before it is rewritten),
through a plain ``java.sql.Connection`` in the Spark driver's JVM (py4j); a Spark
Connect client, which has no JVM, has Spark's JDBC reader run them on the server.

The JDBC driver comes from the job's ``--jars`` (e.g. the ``spark_args`` setting
``--jars /usr/share/java/postgresql.jar``), exactly as for Spark's own reads and writes.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from ..errors import DatasetError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from .datasets import Dataset

# java.sql.Types -> Spark SQL type of the chunk column (anything else: string)
_SQL_TYPES = {-6: "int", 5: "int", 4: "int", -5: "bigint", 6: "double", 8: "double"}
_SQL_TYPES |= {7: "float", 91: "date", 93: "timestamp", 16: "boolean", -7: "boolean"}


def empty_chunk(spark: SparkSession, dataset: Dataset, *more: Dataset) -> str | None:
    """Delete the rows of the dataset's chunk (and of the chunks of ``more``, the same
    dataset at other dataids: a batch's) from its table, in one statement; return the
    Spark type of the chunk column, or None when the table does not exist yet (Spark
    will create it)."""
    if is_connect(spark):
        return _empty_chunk_remote(spark, dataset, more)
    table, column, literal = dataset.table, dataset.chunk_column, _literals(dataset, more)
    with connection(spark, dataset) as conn:
        if not _table_exists(conn, table):
            return None
        statement = conn.createStatement()
        try:
            query = f"SELECT {column} FROM {table} WHERE 1 = 0"
            column_type = _spark_type(statement.executeQuery(query).getMetaData())
            statement.executeUpdate(f"DELETE FROM {table} WHERE {column} {literal}")
        except Exception as exc:
            reason = f"cannot empty chunk '{dataset.dataid}' of {table}: {java_message(exc)}"
            raise DatasetError(dataset.datasetid, reason) from None
        finally:
            statement.close()
        return column_type


def _literals(dataset: Dataset, more: tuple[Dataset, ...]) -> str:
    """``= 'd'``, or ``IN ('d1', 'd2', ...)`` for a batch's chunks."""
    if not more:
        return f"= {dataset.chunk_literal()}"
    return f"IN ({', '.join(d.chunk_literal() for d in (dataset, *more))})"


def is_connect(spark: SparkSession) -> bool:
    """Is ``spark`` a Spark Connect client's session (no JVM of its own to call)?"""
    return type(spark).__module__.startswith("pyspark.sql.connect")


def _empty_chunk_remote(
    spark: SparkSession, dataset: Dataset, more: tuple[Dataset, ...] = ()
) -> str | None:
    """:func:`empty_chunk` for a Spark Connect client, through Spark's own JDBC reader on
    the server: the table looked up in ``information_schema``, the chunk column's type
    read from an empty query, the DELETE run as that reader's ``sessionInitStatement``
    (autocommitted, before its query)."""
    table, column, literal = dataset.table, dataset.chunk_column, _literals(dataset, more)
    schema, _, name = table.rpartition(".")
    where = f"lower(table_name) = lower('{name}')"
    if schema:
        where += f" AND lower(table_schema) = lower('{schema}')"

    def query(sql: str, init: str | None = None) -> Any:
        reader = spark.read.format("jdbc").options(**dataset.jdbc_options())
        if init is not None:
            reader = reader.option("sessionInitStatement", init)
        return reader.option("query", sql).load()

    try:
        found = query(f"SELECT count(*) AS n FROM information_schema.tables WHERE {where}")
        if not found.collect()[0][0]:
            return None
        probe = f"SELECT {column} FROM {table} WHERE 1 = 0"
        frame = query(probe, f"DELETE FROM {table} WHERE {column} {literal}")
        frame.collect()  # the reader's session ran the DELETE
        return frame.schema.fields[0].dataType.simpleString()
    except Exception as exc:
        reason = f"cannot empty chunk '{dataset.dataid}' of {table}: {_first_line(exc)}"
        raise DatasetError(dataset.datasetid, reason) from None


def _first_line(exc: Exception) -> str:
    text = " ".join(str(exc).split("\n", 1)[0].split())
    return text[:300]


@contextmanager
def connection(spark: SparkSession, dataset: Dataset) -> Iterator[Any]:
    """A ``java.sql.Connection`` to a JDBC dataset, autocommit on, closed on exit."""
    jvm = spark.sparkContext._jvm
    options = dataset.jdbc_options()
    try:
        if dataset.jdbc_driver:
            # makes a driver from --jars visible to DriverManager, as Spark's own reads do
            jvm.org.apache.spark.sql.execution.datasources.jdbc.DriverRegistry.register(
                dataset.jdbc_driver
            )
        properties = jvm.java.util.Properties()
        for key in ("user", "password"):
            if options.get(key):
                properties.setProperty(key, options[key])
        conn = jvm.java.sql.DriverManager.getConnection(dataset.jdbc_url, properties)
    except Exception as exc:
        raise DatasetError(dataset.datasetid, f"cannot connect: {java_message(exc)}") from None
    try:
        yield conn
    finally:
        conn.close()


def java_message(exc: Exception) -> str:
    """The Java exception's own message, on one line (py4j's text adds a stack trace)."""
    java = getattr(exc, "java_exception", None)
    text = str(java.getMessage()) if java is not None else str(exc)
    return " ".join(text.split())


def _spark_type(meta: Any) -> str:
    sql_type = meta.getColumnType(1)
    if sql_type in (2, 3):  # NUMERIC, DECIMAL
        return f"decimal({meta.getPrecision(1)},{meta.getScale(1)})"
    return _SQL_TYPES.get(sql_type, "string")


def _table_exists(conn: Any, table: str) -> bool:
    schema, _, name = table.rpartition(".")
    meta = conn.getMetaData()
    for fold in (str, str.lower, str.upper):  # databases keep names in their own case
        found = meta.getTables(None, fold(schema) if schema else None, fold(name), None)
        try:
            if found.next():
                return True
        finally:
            found.close()
    return False
