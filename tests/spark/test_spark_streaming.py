"""Streaming micro-batches as chunks: ``utility stream ./orders.py`` (a real spark-submit)
turns each micro-batch of items dropped with ``utility drop`` into one READY chunk, which
a downstream batch job (``RunJob --all ./downstream.py``) consumes like any chunk; a
``kill -9`` of the stream and a restart neither lose nor duplicate a batch."""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import subprocess
from pathlib import Path

import pytest

from dataflow.errors import StreamError
from dataflow.spark import stream
from support import BIN, rows, statuses, wait_for

SPARK_ARGS = (
    "--master local[1] --conf spark.ui.enabled=false --conf spark.ui.showConsoleProgress=false "
    "--conf spark.sql.shuffle.partitions=1 --conf spark.log.level=ERROR"
)
SCHEMA = "item STRING, sku STRING, qty STRING"
# the stream: the same kind of transformation a batch job uses; the test's markers make it
# hang while a chunk is written ("slow"), or die right after a chunk is READY
STREAM = """\
import os, signal, time
from pathlib import Path

from pyspark.sql import functions as F

import dataflow.spark as df

HERE = Path(__file__).resolve().parent


def hang_if_asked(sku):  # runs while the chunk is being written
    if (HERE / "slow").exists():
        (HERE / "writing").touch()
        time.sleep(600)
    return sku


def clean(items):
    valid = items.where(F.trim("sku") != "")
    return valid.select(
        "item", F.udf(hang_if_asked)(F.upper("sku")).alias("sku"), F.col("qty").cast("int").alias("qty")
    )


def recorded(chunk):
    print(f"chunk {chunk.dataid} rows {chunk.rows} written {chunk.written}", flush=True)
    if chunk.written and (HERE / "die-after-ready").exists():
        os.killpg(0, signal.SIGKILL)  # READY recorded, the batch not yet committed


SCHEMA = "item STRING, sku STRING, qty STRING"
df.stream(clean, schema=SCHEMA, trigger="500 milliseconds", on_chunk=recorded).awaitTermination()
"""
DOWNSTREAM = """\
import dataflow.spark as df


def run(spark, job):
    df.write(df.read(spark, job.input()).where("qty > 0"), job.output())
"""


class Stream:
    """``utility stream ./orders.py`` in a session of its own (spark-submit, its JVM, the
    Python driver and workers): killed as a whole with ``kill -9``, as a crash would."""

    def __init__(self, cli, name: str):
        self.log = cli.cwd / f"{name}.log"
        with open(self.log, "wb") as out:
            self.process = subprocess.Popen(
                [str(BIN / "utility"), "stream", "./orders.py"],
                cwd=cli.cwd,
                env=cli.env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def lines(self) -> list[str]:
        return [x for x in self.log.read_text().splitlines() if x.startswith("chunk ")]

    def kill(self, number: int = signal.SIGKILL) -> int:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, number)
        return self.process.wait(timeout=60)


def item(cli, name: str, valid: int) -> str:
    """A CSV item: ``valid`` orders and one without a sku (the stream drops it)."""
    lines = ["item,sku,qty", f"{name},,9"] + [f"{name},sku{n},{n + 1}" for n in range(valid)]
    path = cli.cwd / "incoming" / f"{name}.csv"
    path.parent.mkdir(exist_ok=True)
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def chunk_rows(spark, data: Path, dataset: str) -> dict[str, list[tuple]]:
    """Every chunk of a dataset: its rows (item, sku, qty), read back from its folder."""
    found = {}
    for folder in sorted((data / dataset).glob("dataid=*")):
        frame = spark.read.parquet(str(folder))
        found[folder.name[len("dataid=") :]] = sorted(
            (r.item, r.sku, r.qty) for r in frame.collect()
        )
    return found


def wait_ready(cli, dataids: list[str], stream: Stream) -> None:
    def ready() -> bool:
        assert stream.process.poll() is None, stream.log.read_text()[-3000:]
        return all(statuses(cli.cwd, "orders").get(d) == "READY" for d in dataids)

    wait_for(ready, timeout=240, what=f"chunks {dataids} READY")


def test_waves_become_chunks_consumed_downstream_and_a_killed_stream_resumes(cli, spark):
    data = cli.cwd / "data"
    cli.ok("createtables")
    for name, fmt in (("landing", "csv"), ("clean", "parquet"), ("consumed", "parquet")):
        cli.ok("register-dataset", name, "--database", fmt, "--schemaname", str(data),
               "--tablename", name)  # fmt: skip
    cli.ok("register-job", "orders", "--in", "landing", "--out", "clean",
           "--set", f"spark_args={SPARK_ARGS}")  # fmt: skip
    cli.ok("register-job", "downstream", "--in", "clean", "--out", "consumed",
           "--set", f"spark_args={SPARK_ARGS}")  # fmt: skip
    (cli.cwd / "orders.py").write_text(STREAM)
    (cli.cwd / "downstream.py").write_text(DOWNSTREAM)
    sizes = {"w1": 3, "w2": 5, "w3": 2, "w4": 4, "w5": 1, "w6": 2}
    items = {name: item(cli, name, valid) for name, valid in sizes.items()}

    # three waves, three chunks, consumed downstream by a batch job
    first = Stream(cli, "first")
    for dataid, name in enumerate(("w1", "w2", "w3")):
        assert cli.ok("drop", "landing", items[name]).out.startswith("1 item dropped")
        wait_ready(cli, [str(dataid)], first)
    drained = cli.runjob("--all", "./downstream.py", timeout=300)
    assert drained.code == 0, drained
    assert statuses(cli.cwd, "downstream") == {"0": "READY", "1": "READY", "2": "READY"}
    # batch jobs only see READY chunks: the stream is their producer
    assert rows(cli.cwd, "select distinct jobid from datastatus where datasetid='clean'") == [
        ("orders",)
    ]

    # kill -9 while a chunk is being written: the restarted stream replays the batch and
    # rewrites that chunk whole
    (cli.cwd / "slow").touch()
    cli.ok("drop", "landing", items["w4"])
    wait_for(lambda: (cli.cwd / "writing").exists(), timeout=120, what="the write under way")
    assert first.kill() != 0
    assert "3" not in statuses(cli.cwd, "orders")
    (cli.cwd / "slow").unlink()
    second = Stream(cli, "second")
    wait_ready(cli, ["3"], second)
    # chunk 3's callback comes after its READY: not to be the one that dies below
    wait_for(lambda: "chunk 3 " in second.log.read_text(), timeout=120, what="chunk 3's callback")

    # killed right after chunk 4 is READY, before Spark committed the batch: the replay
    # leaves chunk 4 as it is, and the next items are chunk 5
    (cli.cwd / "die-after-ready").touch()
    cli.ok("drop", "landing", items["w5"])
    assert second.process.wait(timeout=240) in (-signal.SIGKILL, 128 + signal.SIGKILL)
    assert statuses(cli.cwd, "orders").get("4") == "READY"
    (cli.cwd / "die-after-ready").unlink()
    written = {p: p.stat().st_mtime_ns for p in (data / "clean" / "dataid=4").iterdir()}
    third = Stream(cli, "third")
    try:
        wait_for(lambda: any(x.startswith("chunk 4 ") for x in third.lines()), timeout=240,
                 what="the replay of batch 4")  # fmt: skip
        assert third.lines()[0] == "chunk 4 rows 0 written False"
        cli.ok("drop", "landing", items["w6"])
        wait_ready(cli, ["5"], third)
        wait_for(lambda: len(third.lines()) == 2, timeout=60, what="the stream's line of chunk 5")
    finally:
        third.kill(signal.SIGTERM)
    assert {p: p.stat().st_mtime_ns for p in (data / "clean" / "dataid=4").iterdir()} == written

    # nothing lost, nothing twice: one chunk per batch, each holding its wave's rows
    expected = {
        str(n): sorted((name, f"SKU{k}", k + 1) for k in range(sizes[name]))
        for n, name in enumerate(sizes)
    }
    assert statuses(cli.cwd, "orders") == dict.fromkeys(expected, "READY")
    assert chunk_rows(spark, data, "clean") == expected
    # what each stream said (its output passes through the JVM: a line printed just
    # before a kill -9 of the whole session may be lost, so the second's last is not read)
    assert [x.split()[1] for x in first.lines()] == ["0", "1", "2"]
    assert second.lines()[0] == "chunk 3 rows 4 written True"
    assert third.lines() == ["chunk 4 rows 0 written False", "chunk 5 rows 2 written True"]
    drained = cli.runjob("--all", "./downstream.py", timeout=300)
    assert drained.code == 0, drained
    assert chunk_rows(spark, data, "consumed") == expected


def test_a_stream_refuses_to_start_twice_or_without_its_checkpoint(cli, spark):
    data = cli.cwd / "data"
    cli.ok("createtables")
    cli.ok("register-dataset", "landing", "--database", "json", "--schemaname", str(data))
    cli.ok("register-dataset", "clean", "--database", "parquet", "--schemaname", str(data),
           "--tablename", "clean")  # fmt: skip
    cli.ok("register-job", "orders", "--in", "landing", "--out", "clean")
    environ = {
        "jobid": "orders",
        "DATAFLOW_DB": str(cli.address),
        **{f"{d}_{c}": v for d, kind in (("landing", "IN"), ("clean", "OUT"))
           for c, v in (("datasetid", d), ("itemtype", kind), ("database", "parquet"),
                        ("schemaname", str(data)), ("tablename", d))},
    }  # fmt: skip
    lock = cli.cwd / "dataflow.db.d" / "streams" / "orders.lock"
    lock.parent.mkdir(parents=True)
    with open(lock, "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        with pytest.raises(StreamError, match="its stream is already running"):
            stream(lambda f: f, schema=SCHEMA, spark=spark, environ=environ)
    for _ in range(2):  # a stream that could not start leaves the job's lock free
        with pytest.raises(StreamError, match="give schema= for the items of 'landing'"):
            stream(lambda f: f, spark=spark, environ=environ)
    with pytest.raises(StreamError, match="it runs for chunk 7 under RunJob: start a stream"):
        stream(lambda f: f, schema=SCHEMA, spark=spark, environ={**environ, "dataid": "7"})
    cli.ok("ready", "clean", "0", "1")
    with pytest.raises(StreamError, match="it has 2 chunks but no checkpoint at"):
        stream(lambda f: f, schema=SCHEMA, spark=spark, environ=environ)
