"""Statements Spark's JDBC sink cannot issue (emptying one chunk before it is rewritten),
through a plain ``java.sql.Connection`` in the Spark driver's JVM (py4j).

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


def empty_chunk(spark: SparkSession, dataset: Dataset) -> str | None:
    """Delete the rows of the dataset's chunk from its table; return the Spark type of
    the chunk column, or None when the table does not exist yet (Spark will create it)."""
    table, column, literal = dataset.table, dataset.chunk_column, dataset.chunk_literal()
    with connection(spark, dataset) as conn:
        if not _table_exists(conn, table):
            return None
        statement = conn.createStatement()
        try:
            query = f"SELECT {column} FROM {table} WHERE 1 = 0"
            column_type = _spark_type(statement.executeQuery(query).getMetaData())
            statement.executeUpdate(f"DELETE FROM {table} WHERE {column} = {literal}")
        except Exception as exc:
            reason = f"cannot empty chunk '{dataset.dataid}' of {table}: {java_message(exc)}"
            raise DatasetError(dataset.datasetid, reason) from None
        finally:
            statement.close()
        return column_type


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
