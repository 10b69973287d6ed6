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
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .errors import ChunkMissing, DatasetError, NoSuchJobDataset, NotAJobEnvironment, PasskeyMissing

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

FORMATS = ("parquet", "csv", "json", "orc")
DEFAULT_FORMAT = "parquet"  # what the seed's ``file:`` means
CHUNK_COLUMN = "dataid"  # the JDBC chunk column by convention
CHUNK_COLUMN_ITEM = "dataid_column"  # job item naming another one
READ_DEFAULTS = {"csv": {"header": "true"}}
WRITE_DEFAULTS = {"csv": {"header": "true"}}
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
# Spark's own escaping of partition values in paths (ExternalCatalogUtils.escapePathName)
_PATH_SPECIAL = set("\"#%'*/:=?\\\x7f{[]^") | {chr(c) for c in range(1, 32)}


def chunk_folder(dataid: str) -> str:
    """``dataid=<d>`` with the characters Spark escapes in partition folders escaped."""
    return "dataid=" + "".join(f"%{ord(c):02X}" if c in _PATH_SPECIAL else c for c in dataid)


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

    @property
    def kind(self) -> str:
        """``file`` or ``jdbc``."""
        database = self.database.strip().lower()
        if database in FORMATS or database in ("file:", "file"):
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
        database = self.database.strip().lower()
        return database if database in FORMATS else DEFAULT_FORMAT

    @property
    def table_path(self) -> str:
        """``<base>/<table>``: the folder holding every chunk (``s3a://``, ``hdfs://`` kept)."""
        if not self.schemaname:
            raise DatasetError(self.datasetid, "schemaname (the base path or URI) is empty")
        base = self.schemaname.rstrip("/") or "/"
        table = self.tablename.strip("/")
        return f"{base.rstrip('/')}/{table}" if table else base

    @property
    def chunk_path(self) -> str:
        if not self.dataid:
            raise DatasetError(self.datasetid, "the dataid is empty")
        return f"{self.table_path}/{chunk_folder(self.dataid)}"

    # -- JDBC datasets -------------------------------------------------------------------

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


@dataclass(frozen=True)
class JobContext:
    """What RunJob told the job: its id, its chunk, its IN and OUT datasets."""

    jobid: str
    dataid: str
    inputs: dict[str, Dataset]
    outputs: dict[str, Dataset]
    environ: Mapping[str, str] = field(default_factory=dict, repr=False)

    @classmethod
    def from_environ(cls, environ: Mapping[str, str] | None = None) -> JobContext:
        """Read the variables RunJob sets (SPEC §5) from ``environ`` (default os.environ)."""
        env = dict(os.environ if environ is None else environ)
        for name in ("dataid", "jobid"):
            if not env.get(name):
                raise NotAJobEnvironment(name)
        datasets: dict[str, dict[str, Dataset]] = {"IN": {}, "OUT": {}}
        for key, itemtype in env.items():
            name = key[: -len("_itemtype")]
            if not key.endswith("_itemtype") or env.get(f"{name}_datasetid") != name:
                continue
            if itemtype in datasets:
                datasets[itemtype][name] = _dataset(env, name, itemtype)
        return cls(env["jobid"], env["dataid"], datasets["IN"], datasets["OUT"], env)

    def input(self, name: str | None = None) -> Dataset:
        """The IN dataset ``name``; without a name, the job's only one."""
        return self._pick(self.inputs, "IN", name)

    def output(self, name: str | None = None) -> Dataset:
        """The OUT dataset ``name``; without a name, the job's only one."""
        return self._pick(self.outputs, "OUT", name)

    def item(self, name: str, default: str | None = None) -> str | None:
        """A job item (a ``job`` row that is not IN/OUT), as RunJob exported it."""
        return self.environ.get(name, default)

    def session(self, app_name: str | None = None) -> SparkSession:
        """The SparkSession; master and resources come from spark-submit's arguments."""
        from pyspark.sql import SparkSession

        name = app_name or f"{self.jobid} {self.dataid}"
        return SparkSession.builder.appName(name).getOrCreate()

    def _pick(self, datasets: dict[str, Dataset], direction: str, name: str | None) -> Dataset:
        if name is None and len(datasets) == 1:
            return next(iter(datasets.values()))
        if name is not None and name in datasets:
            return datasets[name]
        raise NoSuchJobDataset(self.jobid, direction, name, sorted(datasets))


def context(environ: Mapping[str, str] | None = None) -> JobContext:
    """The job's context, from the environment RunJob gave it."""
    return JobContext.from_environ(environ)


def registered(
    datasetid: str, dataid: str = "", *, job: str | None = None, db: str | None = None
) -> Dataset:
    """A dataset as registered in the store, for tools run outside RunJob (a report, a
    reconciliation). With ``job``, its chunk column is the one that job's items name, as
    under RunJob. A stored password is decrypted with the PASSKEY / PASSKEY_FILE key."""
    from . import crypto
    from .store import Store, locate

    with Store.open(locate(db)) as store:
        row = store.datasets([datasetid]).get(datasetid)
        items = {i.itemtype: i.itemvalue or "" for i in store.job_items(job)} if job else {}
    if row is None:
        raise DatasetError(datasetid, "it is not in table dataset (see 'utility datasets')")
    password = ""
    if row["encryptedpass"]:
        what = f"the password of dataset '{datasetid}'"
        passkey = crypto.read_passkey()
        if passkey is None:
            raise PasskeyMissing(what)
        password = crypto.decrypt(str(row["encryptedpass"]), passkey, what)
    column = _chunk_column(items, datasetid)
    text = {k: "" if row[k] is None else str(row[k]) for k in _COLUMNS}
    return Dataset(datasetid, dataid, password=password, chunk_column=column, **text)


def _chunk_column(items: Mapping[str, str], datasetid: str) -> str:
    """``<dataset>_dataid_column``, else ``dataid_column``, else ``dataid``."""
    specific = items.get(f"{datasetid}_{CHUNK_COLUMN_ITEM}")
    return specific or items.get(CHUNK_COLUMN_ITEM) or CHUNK_COLUMN


_COLUMNS = ("hostname", "database", "schemaname", "tablename", "username")


def _dataset(env: Mapping[str, str], name: str, itemtype: str) -> Dataset:
    def value(column: str) -> str:
        return env.get(f"{name}_{column}", "")

    column = _chunk_column(env, name)
    return Dataset(
        datasetid=name,
        dataid=env["dataid"],
        itemtype=itemtype,
        hostname=value("hostname"),
        database=value("database"),
        schemaname=value("schemaname"),
        tablename=value("tablename"),
        username=value("username"),
        password=value("password"),
        chunk_column=column,
    )


# -- reading and writing one chunk ------------------------------------------------------------


def read(
    spark: SparkSession,
    dataset: Dataset,
    *,
    schema: Any = None,
    options: Mapping[str, str] | None = None,
) -> DataFrame:
    """Chunk ``dataset.dataid`` of ``dataset``: its folder, or its rows in the database.

    ``schema`` (a DDL string or StructType) fixes the columns of a csv or json chunk;
    ``options`` go to Spark's reader (e.g. ``{"sep": ";"}``, ``{"fetchsize": "10000"}``).
    """
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
    name holds it); a JDBC chunk's rows are deleted, then ``df`` is appended with the
    chunk column set to the dataid. If the write fails half-way the run is FAILED, so
    nobody reads the chunk, and the rerun replaces it again.
    """
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

    column_type = jdbc.empty_chunk(df.sparkSession, dataset)  # None: no table yet
    value = F.lit(dataset.dataid).cast(column_type or "string")
    df = df.withColumn(dataset.chunk_column, value)
    writer = df.write.format("jdbc").mode("append").options(**dataset.jdbc_options())
    writer.option("dbtable", dataset.table).options(**options).save()
