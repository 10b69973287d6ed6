"""A quicker start for the JVMs of the Spark tests' spark-submits: C1 JIT only, serial
GC, and a class-data-sharing archive of Spark's classes, dumped once per test run and
shared by pytest's workers (the fixture ``quick_jvm`` of tests/conftest.py)."""

from __future__ import annotations

import contextlib
import fcntl
import subprocess
import warnings
from collections.abc import Iterator
from pathlib import Path

WARM_UP = """\
import sys
from pyspark.sql import SparkSession
spark = SparkSession.builder.getOrCreate()
frame = spark.createDataFrame([(1, "a")], "n INT, s STRING")
for fmt in ("parquet", "csv", "json", "orc"):
    frame.write.mode("overwrite").format(fmt).option("header", True).save(f"{sys.argv[1]}/{fmt}")
    read = spark.read.format(fmt).option("header", True).load(f"{sys.argv[1]}/{fmt}")
    read.groupBy("n").count().collect()
"""


@contextlib.contextmanager
def _alone(folder: Path) -> Iterator[None]:
    """Held by one pytest worker at a time (an OS lock, released if the worker dies)."""
    with open(folder / "lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _users(folder: Path, change: int) -> int:
    """The workers using the archive, changed by ``change`` (under ``_alone``)."""
    count = folder / "users"
    users = (int(count.read_text()) if count.is_file() else 0) + change
    count.write_text(str(users))
    return users


@contextlib.contextmanager
def quick_jvm(folder: Path, worker_id: str) -> Iterator[str]:
    """spark-submit arguments that start the driver JVM quicker: C1 JIT only, serial GC,
    and a class-data-sharing archive of Spark's classes (the warm-up's JVM: 19 s of CPU
    with the first two, 11 s with the archive too). The archive is dumped once per test
    run: pytest's workers share it, the last one done deletes it. Startup only: the jobs
    run the same Spark either way."""
    from dataflow.run.spark import sparksubmit

    folder.mkdir(exist_ok=True)
    options = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC -Xlog:disable -Xlog:all=warning:stderr"
    archive = folder / "spark.jsa"
    with _alone(folder):
        if not archive.is_file():
            (folder / "warm_up.py").write_text(WARM_UP)
            dump = f"--driver-java-options '{options} -XX:ArchiveClassesAtExit={archive}'"
            settings = {"spark_args": "--master local[1] --conf spark.ui.enabled=false"}
            environ = {"DATAFLOW_SPARK_ARGS": dump}  # the host's own arguments: never filtered
            argv = sparksubmit.job_argv(
                str(folder / "warm_up.py"), [str(folder / worker_id)], settings, environ
            )
            done = subprocess.run(argv, capture_output=True, timeout=600, check=False)
            if done.returncode != 0:  # said, not hidden: each Spark test then starts slower
                archive.unlink(missing_ok=True)
                last = done.stderr.decode(errors="replace").strip().splitlines()[-1:]
                warnings.warn(f"Spark tests start without a CDS archive: {last}", stacklevel=1)
        _users(folder, +1)  # (after the dump: a dump that raised counts no user)
        if archive.is_file():
            options += f" -XX:SharedArchiveFile={archive}"
    yield f"--driver-java-options '{options}'"
    with _alone(folder):
        if _users(folder, -1) == 0:
            archive.unlink(missing_ok=True)  # some 180 MB
