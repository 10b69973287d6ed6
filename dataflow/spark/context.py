"""What RunJob told the job (its id, chunk and datasets, from the environment), and
datasets read from the store for tools run outside RunJob."""

from __future__ import annotations

import os
from collections.abc import Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..errors import DatasetError, NoSuchJobDataset, NotAJobEnvironment, PasskeyMissing
from .datasets import CHUNK_COLUMN, CHUNK_COLUMN_ITEM, Dataset

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

# the chunk a thread of a Spark driver works on (one driver drains many chunks, some
# at once): context() answers with it there, since os.environ is the driver's, not the chunk's
current: ContextVar[JobContext | None] = ContextVar("dataflow_chunk", default=None)


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
        """The SparkSession; master and resources come from spark-submit's arguments. A
        job RunJob runs as a Spark Connect client (``$SPARK_REMOTE``) gets a session of
        that server (pyspark's ``getOrCreate`` connects when ``SPARK_REMOTE`` is set)."""
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
    """The job's context, from the environment RunJob gave it; inside ``run(spark, job)``
    called by a driver that drains many chunks, the context of this thread's chunk."""
    if environ is None:
        chunk = current.get()
        if chunk is not None:
            return chunk
    return JobContext.from_environ(environ)


def registered(
    datasetid: str, dataid: str = "", *, job: str | None = None, db: str | None = None
) -> Dataset:
    """A dataset as registered in the store, for tools run outside RunJob (a report, a
    reconciliation). With ``job``, its chunk column is the one that job's items name, as
    under RunJob. A stored password is decrypted with the PASSKEY / PASSKEY_FILE key."""
    from .. import crypto
    from ..store import locate, open_store

    with open_store(locate(db)) as store:
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
        password = crypto.decrypt(str(row["encryptedpass"]), passkey, what, crypto.seal_of(row))
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
        **(_attempt(env) if itemtype == "OUT" else {}),
    )


def _attempt(env: Mapping[str, str]) -> dict:
    """The run's token, its attempt's number and the job, for an output this run writes."""
    number = env.get("DATAFLOW_ATTEMPT", "")
    return {
        "attempt": env.get("DATAFLOW_RUN", ""),
        "number": int(number) if number.isdigit() else 0,
        "jobid": env.get("jobid", ""),
    }
