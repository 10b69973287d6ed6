"""A job's entry point ``def run(spark, job)``, called in one Spark driver for chunk
after chunk (``RunJob --all ./job.py``), or once (``RunJob ./job.py``); and
``def run_batch(spark, batch)``, called for many chunks at once (:mod:`.batch`).

The job script is imported as a module (a ``if __name__ == "__main__":`` block of it
does not run), with ``sys.argv`` its own arguments and its folder on ``sys.path``, as
when Python runs it. Each chunk is called in a thread of its own with the chunk's
:class:`~.context.JobContext`; its Spark jobs form one job group (cancelled on a
timeout) in a scheduler pool of its own, so chunks run at once share the executors
fairly. In a Spark Connect client (``$SPARK_REMOTE``) the session is a client's, and
a chunk's operations carry a tag of their own instead of a job group.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import threading
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from ..errors import EntryPointError
from .batch import Batch
from .context import JobContext, current

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

ENTRY_POINT = "run"
BATCH_ENTRY_POINT = "run_batch"  # def run_batch(spark, batch): many chunks in one query
REMOTE_ENV = "SPARK_REMOTE"  # set: this process is a Spark Connect client of that server
_MODULE = "dataflow_job"  # the name the job script is imported under
_MIN_SPLITS = "spark.sql.files.minPartitionNum"


def load_entry_points(
    script: str, args: list[str] | tuple[str, ...] = ()
) -> tuple[Callable[..., Any] | None, Callable[..., Any] | None]:
    """Import ``script`` and return its ``run`` and its ``run_batch`` (either may be None,
    not both); errors of the script's own import propagate."""
    path = os.path.abspath(script)
    sys.argv = [script, *args]
    folder = os.path.dirname(path)
    if folder not in sys.path:
        sys.path.insert(0, folder)
    spec = importlib.util.spec_from_file_location(_MODULE, path)
    if spec is None or spec.loader is None:
        raise EntryPointError(script, "it is not a Python file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[_MODULE] = module
    spec.loader.exec_module(module)
    entry, batch = (getattr(module, name, None) for name in (ENTRY_POINT, BATCH_ENTRY_POINT))
    entry, batch = (e if callable(e) else None for e in (entry, batch))
    if entry is None and batch is None:
        raise EntryPointError(script, "it defines no function run(spark, job)")
    return entry, batch


def run_one(script: str, args: list[str]) -> None:
    """One chunk, the job's context from the environment (a plain ``RunJob ./job.py``);
    a job with ``run_batch`` only runs it for a batch of that one chunk."""
    entry, batch = load_entry_points(script, args)
    job = JobContext.from_environ()
    token = current.set(job)
    try:
        if entry is not None:
            entry(job.session(), job)
        else:
            batch(job.session(), Batch((job,)))
    finally:
        current.reset(token)


def is_remote() -> bool:
    """Is this process a Spark Connect client (``$SPARK_REMOTE`` set by RunJob)?"""
    return bool(os.environ.get(REMOTE_ENV))


def interrupt_all() -> None:
    """Interrupt every operation this Spark Connect client runs on its server (a client
    stopped by a signal must leave nothing running there). Nothing to do without one."""
    if not is_remote() or "pyspark.sql.connect.session" not in sys.modules:
        return
    from pyspark.sql.connect.session import SparkSession as RemoteSession

    session = RemoteSession.getActiveSession() or RemoteSession._get_default_session()
    if session is not None and not getattr(session, "is_stopped", False):
        session.interruptAll()


def run_script(script: str, args: list[str]) -> None:
    """A job without the entry point, run as ``python script args...`` would run it."""
    import runpy

    path = os.path.abspath(script)
    sys.argv = [script, *args]
    sys.path.insert(0, os.path.dirname(path))
    runpy.run_path(path, run_name="__main__")


class Engine:
    """One SparkSession for many chunks of a job, each a call of its entry point. A
    Spark Connect client (``$SPARK_REMOTE``) uses its session's operation tags where a
    driver uses job groups: each chunk's operations carry a tag of its own."""

    def __init__(self, script: str, args: list[str] | tuple[str, ...] = ()):
        self.script = script
        self.entry, self.batch_entry = load_entry_points(script, args)
        self.spark: SparkSession | None = None
        self.remote = is_remote()
        self._slots: set[int] = set()
        self._lock = threading.Lock()

    def start(self, app_name: str) -> SparkSession:
        """The session: master and resources from spark-submit; unless the job chose
        otherwise, chunks run at once are scheduled fairly (``spark.scheduler.mode=FAIR``)
        and a scan of files is split in at least four tasks a core
        (``spark.sql.files.minPartitionNum``): a batch or a chunk is a part of a backfill,
        and a scan of few large tasks leaves cores idle at its end. A Spark Connect
        client's session is the server's to configure."""
        from pyspark.sql import SparkSession

        if self.remote:
            self.spark = SparkSession.builder.getOrCreate()
            _ = self.spark.version  # a first call: a server that refuses us claims nothing
            return self.spark
        from pyspark import SparkConf, SparkContext

        builder = SparkSession.builder.appName(app_name)
        SparkContext._ensure_initialized()  # the JVM, and spark-submit's settings with it
        chosen = SparkConf()
        if chosen.get("spark.scheduler.mode", None) is None:
            builder = builder.config("spark.scheduler.mode", "FAIR")
        self.spark = builder.getOrCreate()
        if chosen.get(_MIN_SPLITS, None) is None:
            self.spark.conf.set(_MIN_SPLITS, 4 * self.spark.sparkContext.defaultParallelism)
        return self.spark

    def entry_for(self, count: int) -> str:
        """The name of the entry point a call of ``count`` chunks runs: ``run`` for one
        chunk of a job that defines it, else ``run_batch``."""
        return ENTRY_POINT if count == 1 and self.entry is not None else BATCH_ENTRY_POINT

    def call(self, environ: Mapping[str, str], group: str) -> None:
        """Run the entry point for the chunk ``environ`` describes, in this thread, its
        Spark jobs in job group ``group``."""
        self.call_batch([environ], group)

    def call_batch(self, environs: list[Mapping[str, str]], group: str) -> None:
        """Run the chunks ``environs`` describe as one call, in this thread, their Spark
        jobs in job group ``group``: ``run_batch(spark, batch)``, or ``run(spark, job)``
        for one chunk of a job that defines it."""
        assert self.spark is not None, "start() first"
        jobs = [JobContext.from_environ({**os.environ, **environ}) for environ in environs]
        if self.entry_for(len(jobs)) == ENTRY_POINT:
            job = jobs[0]

            def work() -> None:
                self.entry(self.spark, job)
        else:
            job = None  # df.context() names no one chunk in a batch

            def work() -> None:
                self.batch_entry(self.spark, Batch(tuple(jobs)))

        token = current.set(job)
        try:
            if self.remote:
                self._call_remote(work, group)
            else:
                self._call_local(work, group, " ".join([jobs[0].jobid, *(j.dataid for j in jobs)]))
        finally:
            current.reset(token)

    def _call_local(self, work: Callable[[], None], group: str, description: str) -> None:
        context = self.spark.sparkContext
        slot = self._take_slot()
        try:
            context.setLocalProperty("spark.scheduler.pool", f"chunk{slot}")
            context.setJobGroup(group, description, interruptOnCancel=True)
            work()
        finally:
            with self._lock:
                self._slots.discard(slot)

    def _call_remote(self, work: Callable[[], None], group: str) -> None:
        """The chunk's operations on the server carry the tag ``group`` (tags are the
        calling thread's, so chunks run at once keep theirs apart)."""
        self.spark.addTag(group)
        try:
            work()
        finally:
            self.spark.removeTag(group)

    def _take_slot(self) -> int:
        with self._lock:
            slot = next(n for n in range(len(self._slots) + 1) if n not in self._slots)
            self._slots.add(slot)
            return slot

    def cancel(self, group: str) -> None:
        """Cancel the running and waiting Spark jobs of a chunk."""
        if self.spark is None:
            return
        if self.remote:
            self.spark.interruptTag(group)
        else:
            self.spark.sparkContext.cancelJobGroup(group)

    def alive(self) -> bool:
        """Is the session still usable (its JVM up, its context not stopped)? A Spark
        Connect client's: not stopped (whether its server answers is the caller's to ask)."""
        if self.spark is None:
            return False
        if self.remote:
            return not getattr(self.spark, "is_stopped", False)
        try:
            return not self.spark.sparkContext._jsc.sc().isStopped()
        except Exception:  # the JVM is gone: py4j cannot even ask
            return False

    def stop(self) -> None:
        """A Spark Connect client's session is released on its server. A driver's
        context is left to its JVM, which stops it when this process ends, as for any
        PySpark script (PySpark's own ``stop`` waits up to 0.5 s more, for a poll of its
        accumulator server)."""
        if self.remote and self.spark is not None and self.alive():
            self.spark.stop()
