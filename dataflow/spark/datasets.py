"""A dataset of the job at the job's chunk: where that chunk lives (a folder, or rows
behind a JDBC URL) and how to name it safely in a path or in SQL."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field

from ..errors import DatasetError
from ..layout import chunk_folder, file_format, is_file, local, staging, table_path

CHUNK_COLUMN = "dataid"  # the JDBC chunk column by convention
CHUNK_COLUMN_ITEM = "dataid_column"  # job item naming another one
JDBC_DRIVERS = {
    "postgresql": "org.postgresql.Driver",
    "mysql": "com.mysql.cj.jdbc.Driver",
    "mariadb": "org.mariadb.jdbc.Driver",
    "sqlserver": "com.microsoft.sqlserver.jdbc.SQLServerDriver",
    "oracle": "oracle.jdbc.OracleDriver",
    "db2": "com.ibm.db2.jcc.DB2Driver",
    "h2": "org.h2.Driver",
    "sqlite": "org.sqlite.JDBC",
}
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_$]*\Z")
_QUERY = re.compile(r"\s*(select|with)\s", re.IGNORECASE)
_LOCAL_SERVER = re.compile(r"sc://(localhost|127\.[0-9.]+|\[::1\])(:[0-9]+)?(/|;|\Z)")


@dataclass(frozen=True)
class Dataset:
    """One dataset of the job, at the job's chunk. The password never shows in its repr."""

    datasetid: str
    dataid: str
    itemtype: str = "IN"
    hostname: str = ""
    database: str = ""
    schemaname: str = ""
    tablename: str = ""
    username: str = ""
    password: str = field(default="", repr=False)
    chunk_column: str = CHUNK_COLUMN
    attempt: str = field(default="", repr=False)  # the run's token (DATAFLOW_RUN), if any
    number: int = field(default=0, repr=False)  # its attempt's number (DATAFLOW_ATTEMPT)
    jobid: str = field(default="", repr=False)  # the job it is an output of

    @property
    def kind(self) -> str:
        """``file`` or ``jdbc``."""
        if is_file(self.database):
            return "file"
        if self.hostname:
            return "jdbc"
        raise DatasetError(
            self.datasetid,
            "set database to a file format (parquet, csv, json, orc or file:) "
            "or hostname to a database server",
        )

    # -- file datasets -------------------------------------------------------------------

    @property
    def format(self) -> str:
        return file_format(self.database)

    @property
    def table_path(self) -> str:
        """``<base>/<table>``: the folder holding every chunk (``s3a://``, ``hdfs://`` kept)."""
        if not self.schemaname:
            raise DatasetError(self.datasetid, "schemaname (the base path or URI) is empty")
        return table_path(self.schemaname, self.tablename)

    @property
    def chunk_path(self) -> str:
        """Where this run reads and writes the chunk: the chunk's folder, or the run's
        own attempt folder for an output it stages (published by its finish)."""
        if not self.dataid:
            raise DatasetError(self.datasetid, "the dataid is empty")
        if self.staged:
            return staging(self.table_path, self.dataid, self.attempt)
        return f"{self.table_path}/{chunk_folder(self.dataid)}"

    @property
    def staged(self) -> bool:
        """Does this run write the chunk into its own attempt folder (docs/guarantees.md)?
        An OUT file dataset of a run on a local path, where RunJob sees what it writes: a
        Spark Connect client's only when its server runs on this host too."""
        if self.itemtype != "OUT" or not self.attempt or self.kind != "file":
            return False
        if local(self.table_path) is None:
            return False
        remote = os.environ.get("SPARK_REMOTE", "")
        return not remote or _LOCAL_SERVER.match(remote) is not None

    # -- JDBC datasets -------------------------------------------------------------------

    @property
    def fenced(self) -> bool:
        """Is this run's write of the chunk fenced by its attempt's number in the target
        database (docs/guarantees.md)? An OUT JDBC dataset of a run of RunJob's."""
        run = bool(self.attempt and self.number and self.jobid)
        return self.itemtype == "OUT" and run and self.kind == "jdbc"

    @property
    def jdbc_url(self) -> str:
        host = self.hostname.strip()
        if host.startswith("jdbc:"):
            return f"{host.rstrip('/')}/{self.database}" if self.database else host
        return f"jdbc:postgresql://{host}/{self.database}"

    @property
    def jdbc_driver(self) -> str | None:
        return JDBC_DRIVERS.get(self.jdbc_url.split(":")[1])

    def jdbc_options(self) -> dict[str, str]:
        """URL, credentials and driver for Spark's ``jdbc`` source (holds the password)."""
        options = {"url": self.jdbc_url}
        if self.username:
            options["user"] = self.username
        if self.password:
            options["password"] = self.password
        if self.jdbc_driver:
            options["driver"] = self.jdbc_driver
        return options

    @property
    def is_query(self) -> bool:
        return bool(_QUERY.match(self.tablename))

    @property
    def table(self) -> str:
        """``schema.table`` (or ``table``), each part checked to be a plain identifier."""
        if self.is_query:
            raise DatasetError(self.datasetid, "its tablename is a query, not a table to write")
        parts = [p for p in (self.schemaname, self.tablename) if p]
        if not parts or not all(_IDENTIFIER.match(p) for p in parts):
            raise DatasetError(
                self.datasetid,
                f"'{'.'.join(parts)}' is not a table name (schemaname.tablename, "
                "letters, digits, _ and $)",
            )
        return ".".join(parts)

    def chunk_literal(self) -> str:
        """The dataid as an SQL string literal (databases coerce it to the column's type)."""
        if not self.dataid or any(c == "\\" or ord(c) < 32 for c in self.dataid):
            raise DatasetError(
                self.datasetid,
                f"dataid {self.dataid!r} cannot be used in SQL (empty, \\ or control)",
            )
        if not _IDENTIFIER.match(self.chunk_column):
            raise DatasetError(
                self.datasetid, f"chunk column '{self.chunk_column}' is not a column name"
            )
        return "'" + self.dataid.replace("'", "''") + "'"

    def source_sql(self) -> str:
        """The dataset's rows, all chunks: its table, or its query in parentheses."""
        if self.is_query:
            return f"({self.tablename.strip().rstrip(';')}) dataflow_source"
        return self.table

    def chunk_sql(self) -> str:
        """A ``dbtable`` that yields exactly this chunk; the filter runs in the database."""
        where = f"{self.chunk_column} = {self.chunk_literal()}"
        return f"(SELECT * FROM {self.source_sql()} WHERE {where}) dataflow_chunk"
