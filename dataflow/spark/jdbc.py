"""Writing chunks of a JDBC dataset, and the statements Spark's JDBC sink cannot issue
(emptying a chunk before it is rewritten; publishing a staged write), through a plain
``java.sql.Connection`` in the Spark driver's JVM (py4j); a Spark Connect client, which
has no JVM, has Spark's JDBC reader run them on the server.

A run of RunJob's writes its chunks fenced (docs/guarantees.md): into a staging table of
its own, then moved into the table in one transaction that records the attempt's number
in ``dataflow_fence`` (beside the table) and refuses an attempt older than the one there.

The JDBC driver comes from the job's ``--jars`` (e.g. the ``spark_args`` setting
``--jars /usr/share/java/postgresql.jar``), exactly as for Spark's own reads and writes.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from ..errors import DatasetError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from .datasets import Dataset

# java.sql.Types -> Spark SQL type of the chunk column (anything else: string)
_SQL_TYPES = {-6: "int", 5: "int", 4: "int", -5: "bigint", 6: "double", 8: "double"}
_SQL_TYPES |= {7: "float", 91: "date", 93: "timestamp", 16: "boolean", -7: "boolean"}


FENCE_TABLE = "dataflow_fence"
_FENCE_COLUMNS = (
    "tablename VARCHAR(200) NOT NULL, dataid VARCHAR(200) NOT NULL, "
    "jobid VARCHAR(200) NOT NULL, attempt INTEGER NOT NULL, token VARCHAR(64) NOT NULL, "
    "PRIMARY KEY (tablename, dataid, jobid)"
)


def write(frame: DataFrame, chunks: Sequence[Dataset], options: Mapping[str, str]) -> None:
    """Replace the rows of each chunk by its rows of ``frame`` (column ``dataid``), the
    chunk column set to the dataid (cast to the column's type): fenced when every chunk
    is, else emptied in one DELETE and then appended."""
    from pyspark.sql import functions as F

    first, *more = chunks
    spark = frame.sparkSession
    fenced = all(chunk.fenced for chunk in chunks) and not is_connect(spark)
    column_type = _prepare(spark, first) if fenced else empty_chunk(spark, first, *more)
    frame = frame.withColumn(first.chunk_column, F.col("dataid").cast(column_type or "string"))
    if first.chunk_column != "dataid":
        frame = frame.drop("dataid")
    if not fenced:
        _append(frame, first, first.table, options)
        return
    if column_type is None:  # Spark creates the table, from the frame's schema
        _append(frame.limit(0), first, first.table, options)
    stage = _beside(first.table, f"dataflow_stage_{first.attempt[:16]}")
    try:
        _append(frame, first, stage, options, mode="overwrite")
        with connection(spark, first) as conn:
            refused = _publish(conn, chunks, stage, frame.columns)
    finally:
        with connection(spark, first) as conn:
            if _table_exists(conn, stage):
                _execute(conn, first, f"DROP TABLE {stage}")
    if refused:
        newer = ", ".join(f"'{dataid}' (attempt {n})" for dataid, n in refused)
        reason = f"a newer attempt wrote chunk {newer}: this run's rows of it are not written"
        raise DatasetError(first.datasetid, reason)


def _append(
    frame: DataFrame,
    dataset: Dataset,
    table: str,
    options: Mapping[str, str],
    mode: str = "append",
) -> None:
    writer = frame.write.format("jdbc").mode(mode).options(**dataset.jdbc_options())
    writer.option("dbtable", table).options(**options).save()


def _beside(table: str, name: str) -> str:
    """``name`` in the schema of ``table``."""
    schema = table.rpartition(".")[0]
    return f"{schema}.{name}" if schema else name


def _prepare(spark: SparkSession, dataset: Dataset) -> str | None:
    """Make sure the fence table exists; return the Spark type of the chunk column, or
    None when the table does not exist yet."""
    fence = _beside(dataset.table, FENCE_TABLE)
    with connection(spark, dataset) as conn:
        if not _table_exists(conn, fence):
            try:
                _execute(conn, dataset, f"CREATE TABLE {fence} ({_FENCE_COLUMNS})")
            except DatasetError:
                if not _table_exists(conn, fence):  # else: made by a run beside this one
                    raise
        if not _table_exists(conn, dataset.table):
            return None
        statement = conn.createStatement()
        try:
            return _column_type(statement, dataset)
        except Exception as exc:
            reason = f"cannot write chunk '{dataset.dataid}' into {dataset.table}: "
            raise DatasetError(dataset.datasetid, reason + java_message(exc)) from None
        finally:
            statement.close()


def _publish(
    conn: Any, chunks: Sequence[Dataset], stage: str, columns: Sequence[str]
) -> list[tuple[str, int]]:
    """In one transaction: take each chunk's fence, then replace the rows of the chunks
    whose fence this attempt holds by their rows of ``stage``. Return the chunks a newer
    attempt holds, with its number."""
    first = chunks[0]
    table, column = first.table, first.chunk_column
    conn.setAutoCommit(False)
    try:
        refused = []
        for chunk in sorted(chunks, key=lambda chunk: chunk.dataid):  # one lock order
            newer = _take_fence(conn, chunk)
            if newer is not None:
                refused.append((chunk.dataid, newer))
        owned = [chunk for chunk in chunks if chunk.dataid not in dict(refused)]
        if owned:
            literal = _literals(owned[0], tuple(owned[1:]))
            quote = str(conn.getMetaData().getIdentifierQuoteString()).strip()
            names = ", ".join(f"{quote}{name}{quote}" for name in columns)
            statement = conn.createStatement()
            try:
                statement.executeUpdate(f"DELETE FROM {table} WHERE {column} {literal}")
                statement.executeUpdate(
                    f"INSERT INTO {table} ({names}) SELECT {names} FROM {stage} "
                    f"WHERE {column} {literal}"
                )
            finally:
                statement.close()
        conn.commit()
        return refused
    except Exception as exc:
        conn.rollback()
        reason = f"cannot write chunk '{first.dataid}' into {table}: {java_message(exc)}"
        raise DatasetError(first.datasetid, reason) from None


def _take_fence(conn: Any, chunk: Dataset) -> int | None:
    """Record this attempt as the last to write the chunk, unless a newer attempt (a
    higher number, or the same number of another run) did: return that one's number."""
    fence = _beside(chunk.table, FENCE_TABLE)
    key = "tablename = ? AND dataid = ? AND jobid = ?"
    mine, key_values = (chunk.number, chunk.attempt), (chunk.table, chunk.dataid, chunk.jobid)
    taken = _prepared(
        conn,
        f"UPDATE {fence} SET attempt = ?, token = ? WHERE {key} "
        "AND (attempt < ? OR (attempt = ? AND token = ?))",
        (*mine, *key_values, chunk.number, *mine),
    )
    if taken:
        return None
    found = _bound(conn, f"SELECT attempt FROM {fence} WHERE {key}", key_values)
    try:
        rows = found.executeQuery()
        if rows.next():
            return int(rows.getInt(1))
    finally:
        found.close()
    _prepared(
        conn,
        f"INSERT INTO {fence} (attempt, token, tablename, dataid, jobid) VALUES (?, ?, ?, ?, ?)",
        (*mine, *key_values),
    )
    return None


def _bound(conn: Any, sql: str, values: tuple) -> Any:
    """A prepared statement of ``sql`` with ``values`` bound (the caller closes it)."""
    statement = conn.prepareStatement(sql)
    for index, value in enumerate(values, 1):
        if isinstance(value, int):
            statement.setInt(index, value)
        else:
            statement.setString(index, value)
    return statement


def _prepared(conn: Any, sql: str, values: tuple) -> int:
    """Run one statement with ``values`` bound; return the rows it changed."""
    statement = _bound(conn, sql, values)
    try:
        return int(statement.executeUpdate())
    finally:
        statement.close()


def _execute(conn: Any, dataset: Dataset, sql: str) -> None:
    statement = conn.createStatement()
    try:
        statement.executeUpdate(sql)
    except Exception as exc:
        raise DatasetError(
            dataset.datasetid, f"{sql.split(' (')[0]}: {java_message(exc)}"
        ) from None
    finally:
        statement.close()


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
            column_type = _column_type(statement, dataset)
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


def _column_type(statement: Any, dataset: Dataset) -> str:
    """The Spark type of the chunk column of the dataset's table, read from an empty query."""
    query = f"SELECT {dataset.chunk_column} FROM {dataset.table} WHERE 1 = 0"
    return _spark_type(statement.executeQuery(query).getMetaData())


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
