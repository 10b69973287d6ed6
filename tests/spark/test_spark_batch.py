"""Many chunks per Spark query (``def run_batch(spark, batch)``), each still its own chunk:
the same output as chunk by chunk, its own claim, history row, log and status; a
poisoned chunk fails alone, and the chunks batched with it use no retry."""

from __future__ import annotations

import itertools
import os
import re
import signal
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dataflow.layout import chunk_folder
from dataflow.run.process.logs import log_path
from support import Cli, rows, script, start_runjob, statuses, wait_for

SPARK_ARGS = (
    "--master local[2] --conf spark.ui.enabled=false --conf spark.ui.showConsoleProgress=false "
    "--conf spark.log.level=ERROR --conf spark.sql.shuffle.partitions=2"
)
JOB = """\
import os
import time
import dataflow.spark as df
from pyspark.sql import functions as F

POISON = os.environ.get("POISON_CHUNK")


def shape(frame):
    return frame.withColumn("twice", F.col("n").cast("int") * 2).withColumn(
        "label", F.concat(F.col("name"), F.lit("/"), F.col("n"))
    )


def run(spark, job):
    if job.dataid == POISON:
        raise ValueError(f"chunk {job.dataid} is poisoned")
    df.write(shape(df.read(spark, job.input())), job.output())


def run_batch(spark, batch):
    print(f"job: batch {' '.join(batch.dataids)}", flush=True)
    time.sleep(float(os.environ.get("BATCH_SLEEP", "0")))
    if POISON in batch.dataids:
        raise ValueError(f"chunk {POISON} is poisoned")
    frame = df.read(spark, batch.input())
    assert dict(frame.dtypes)["dataid"] == "string"
    df.write(shape(frame), batch.output())
"""


def setup(
    cli: Cli, chunks: dict[str, int], jobs: tuple[str, ...] = ("job",), **settings: str
) -> Path:
    """Input csv chunks (``dataid -> rows``, 0: a header only) READY in dataset src; each
    job of ``jobs`` reads src and writes csv dataset ``<job>_out``."""
    data = cli.cwd / "data"
    for dataid, count in chunks.items():
        folder = data / "src" / chunk_folder(dataid)
        folder.mkdir(parents=True)
        lines = [f"{n},{dataid} row {n}\n" for n in range(count)]
        (folder / "part-0.csv").write_text("n,name\n" + "".join(lines))
    cli.ok("createtables")
    cli.ok("dml", f"insert into dataset values ('src', '', 'csv', '{data}', 'src', '', '')")
    for job in jobs:
        cli.ok(
            "dml",
            f"insert into dataset values ('{job}_out', '', 'csv', '{data}', 'out_{job}', '', '')",
        )
        cli.ok(
            "dml",
            "insert into job (jobid, itemtype, datasetid, itemvalue) values "
            f"('{job}', 'IN', 'src', null), ('{job}', 'OUT', '{job}_out', null), "
            f"('{job}', 'spark_args', null, '{SPARK_ARGS}')"
            + "".join(f", ('{job}', '{k}', null, '{v}')" for k, v in settings.items()),
        )
        (cli.cwd / f"{job}.py").write_text(JOB)
    for dataid in chunks:
        cli.ok(
            "dml",
            f"insert into datastatus values ('src', 'feed', '{dataid}', 'OUT', 'READY', now())",
        )
    return data


def chunk_files(table: Path, dataid: str) -> tuple[bool, list[bytes]]:
    """A chunk's folder as a reader sees it: its _SUCCESS marker, and its data files'
    bytes (their names hold a random id)."""
    folder = table / chunk_folder(dataid)
    files = [p for p in folder.iterdir() if not p.name.startswith((".", "_"))]
    return (folder / "_SUCCESS").exists(), sorted(p.read_bytes() for p in files)


DATAIDS = ["007", "7", "2026-01-01", "1.0", "10", "2", "a b", "x:y=z", "é", "0x1F"]
_examples = itertools.count()


@settings(
    max_examples=3,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    chunks=st.dictionaries(
        st.sampled_from(DATAIDS), st.sampled_from([0, 1, 3, 40]), min_size=2, max_size=6
    )
)
def test_a_batch_writes_each_chunk_as_the_chunks_one_by_one(cli, quick_jvm, chunks):
    here = Cli(cli.cwd / f"example{next(_examples)}")
    here.cwd.mkdir()
    here.env["DATAFLOW_SPARK_ARGS"] = quick_jvm
    data = setup(here, chunks, ("batched", "single"))
    batched = here.runjob("--batch", "4", "./batched.py", timeout=900)
    single = here.runjob("--batch", "1", "./single.py", timeout=900)
    assert batched.code == 0 and single.code == 0, (batched, single)
    assert statuses(here.cwd, "batched") == {d: "READY" for d in chunks}
    assert statuses(here.cwd, "single") == statuses(here.cwd, "batched")
    for dataid in chunks:
        ours = chunk_files(data / "out_batched", dataid)
        theirs = chunk_files(data / "out_single", dataid)
        assert ours == theirs, dataid
        assert ours[0] and ours[1], dataid  # an empty chunk too: its header, no rows
    assert not (data / "out_batched" / "_attempts").exists()
    # one history row and one log per chunk; the batch's calls in every chunk's log
    runs = rows(here.cwd, "select dataid, attempt, status from run where jobid='batched'")
    assert sorted(runs) == sorted((d, 1, "READY") for d in chunks)
    logs = [Path(log_path(here.cwd / "dataflow.db.d", "batched", d, 1)).read_text() for d in chunks]
    alone = 1 if len(chunks) % 4 == 1 else 0  # the last chunk, claimed alone, calls run
    assert sum("job: batch " in log for log in logs) == len(chunks) - alone, logs


def test_a_poisoned_chunk_fails_alone_and_a_rerun_is_idempotent(cli):
    chunks = {str(n): n for n in range(1, 11)}
    data = setup(cli, chunks)
    cli.ok("dml", "insert into job (jobid, itemtype, itemvalue) values ('job', 'retries', '1')")
    done = cli.runjob("--batch", "10", "./job.py", env={"POISON_CHUNK": "7"}, timeout=900)
    assert done.code == 1, done
    assert statuses(cli.cwd, "job") == {d: "FAILED" if d == "7" else "READY" for d in chunks}
    runs = rows(cli.cwd, "select dataid, attempt, retry, status, reason from run order by runid")
    poisoned = "ValueError: chunk 7 is poisoned"
    # one history row each (a split batch used no attempt), and chunk 7's one retry
    # (setting retries 1), run alone in the same drain
    assert [r for r in runs if r[0] != "7"] == [
        (d, 1, 0, "READY", None) for d in chunks if d != "7"
    ]
    assert [r for r in runs if r[0] == "7"] == [
        ("7", 1, 0, "FAILED", poisoned),
        ("7", 2, 1, "FAILED", poisoned),
    ]
    lines = [line for line in done.lines if re.search(r": job \S+ (READY|FAILED) ", line)]
    assert len(lines) == 11, done.out
    log = (cli.cwd / "dataflow.db.d" / "logs" / "job" / "7.1.log").read_text()
    assert f"the batch of 10 chunks failed ({poisoned}): split in two" in log, log
    assert log.count("Traceback") == 5  # the batch of 10, then of 5, 3 and 2, then alone
    assert "job: batch 1 2 3 4 5 6 7 8 9 10" in log, log
    assert "job: batch" not in (cli.cwd / "dataflow.db.d" / "logs" / "job" / "7.2.log").read_text()
    before = {d: chunk_files(data / "out_job", d) for d in chunks if d != "7"}

    # a rerun of the batch (every chunk resubmitted) writes the same chunks again
    cli.ok("dml", "update datastatus set status = 'RESUBMIT' where jobid = 'job'")
    rerun = cli.runjob("--batch", "10", "./job.py", timeout=900)
    assert rerun.code == 0, rerun
    assert set(statuses(cli.cwd, "job").values()) == {"READY"}
    assert {d: chunk_files(data / "out_job", d) for d in before} == before
    assert len(rows(cli.cwd, "select runid from run")) == 21
    assert not (data / "out_job" / "_attempts").exists()


def _batch(base: Path, dataids: list[str], attempts: dict[str, str]):
    """A batch over csv datasets src (IN) and dst (OUT) in ``base``, as a driver builds it."""
    from dataflow.spark.batch import Batch
    from dataflow.spark.context import JobContext
    from dataflow.spark.datasets import Dataset

    def dataset(name: str, dataid: str, itemtype: str) -> Dataset:
        attempt = attempts.get(dataid, "") if itemtype == "OUT" else ""
        return Dataset(name, dataid, itemtype, "", "csv", str(base), name, attempt=attempt)

    return Batch(
        tuple(
            JobContext(
                "job", d, {"src": dataset("src", d, "IN")}, {"dst": dataset("dst", d, "OUT")}
            )
            for d in dataids
        )
    )


def test_batch_read_keeps_dataids_as_text_and_write_replaces_only_its_chunks(spark, tmp_path):
    import pytest

    import dataflow.spark as df
    from dataflow import layout
    from dataflow.errors import ChunkMissing

    base = tmp_path / "data"
    counts = {"007": 2, "2026-01-01": 3, "x:y=z": 1, "9": 0}
    for dataid, count in counts.items():
        folder = base / "src" / chunk_folder(dataid)
        folder.mkdir(parents=True)
        lines = "".join(f"{n},{dataid}\n" for n in range(count))
        (folder / "part-0.csv").write_text("n,name\n" + lines)
    old = base / "dst" / chunk_folder("9")  # a chunk written before, to be emptied
    old.mkdir(parents=True)
    (old / "part-old.csv").write_text("n,name\n5,stale\n")
    (base / "dst" / chunk_folder("other")).mkdir()  # not in the batch: never touched
    (base / "dst" / chunk_folder("other") / "part-0.csv").write_text("n,name\n1,kept\n")

    batch = _batch(base, list(counts), {})
    frame = df.read(spark, batch.input())
    assert dict(frame.dtypes)["dataid"] == "string"
    got = sorted((r["dataid"], r["name"]) for r in frame.collect())
    assert got == sorted((d, d) for d, c in counts.items() for _ in range(c))

    # in place (no attempt: outside RunJob, or an hdfs:// path): dynamic overwrite
    df.write(frame, batch.output())
    table = base / "dst"
    for dataid, count in counts.items():
        _, files = chunk_files(table, dataid)  # Spark's _SUCCESS: at the table's root
        assert files and b"".join(files).count(b"\n") == count + len(files), dataid
    assert b"stale" not in b"".join(chunk_files(table, "9")[1])
    assert chunk_files(table, "other")[1] == [b"n,name\n1,kept\n"]

    # staged: each chunk's rows in its own attempt folder, none in place until published
    tokens = {d: f"t{n}" for n, d in enumerate(counts)}
    staged = _batch(base, list(counts), tokens)
    before = {d: chunk_files(table, d) for d in counts}
    df.write(frame.where("dataid != '007'"), staged.output())
    assert {d: chunk_files(table, d) for d in counts} == before
    for dataid in counts:
        folder = Path(layout.staging(str(table), dataid, tokens[dataid]))
        files = sorted(
            p.read_bytes() for p in folder.iterdir() if not p.name.startswith((".", "_"))
        )
        rows_written = b"".join(files).count(b"\n") - len(files)
        assert rows_written == (0 if dataid in ("007", "9") else counts[dataid]), dataid
        assert files, dataid  # an empty chunk still has its header
    assert sorted(p.name for p in (table / "_attempts").iterdir()) == sorted(
        chunk_folder(d) for d in counts
    )

    # a row of another chunk fails the write before any chunk changes
    stray = frame.withColumn("dataid", frame["dataid"].substr(1, 2))
    with pytest.raises(Exception, match="not a chunk of this batch"):
        df.write(stray, batch.output())
    assert {d: chunk_files(table, d) for d in counts} == before
    with pytest.raises(ChunkMissing):
        df.read(spark, _batch(base, ["007", "404"], {}).input())


def test_two_racing_batch_drains_run_each_chunk_once(cli):
    chunks = {str(n): 2 for n in range(1, 13)}
    setup(cli, chunks)
    env = {**cli.env, "BATCH_SLEEP": "1"}
    drains = [start_runjob(cli, "--batch", "3", "./job.py", env=env) for _ in range(2)]
    try:
        ended = [drain.communicate(timeout=900) for drain in drains]
    finally:
        for drain in drains:
            if drain.poll() is None:
                drain.kill()
    assert [drain.returncode for drain in drains] == [0, 0], ended
    runs = rows(cli.cwd, "select dataid, attempt, status from run")
    assert sorted(runs) == sorted((d, 1, "READY") for d in chunks)  # each chunk run once


def test_a_killed_batch_driver_leaves_its_chunks_to_recover(cli):
    chunks = {str(n): 1 for n in range(1, 7)}
    data = setup(cli, chunks)
    cli.ok("dml", "insert into job (jobid, itemtype, itemvalue) values ('job', 'retries', '1')")
    env = {**cli.env, "BATCH_SLEEP": "600"}
    drain = start_runjob(cli, "--batch", "4", "./job.py", env=env)
    try:
        # its job started: RunJob has been told of the batch's chunks (it is told before
        # the job starts, after the claim is committed: a kill in between leaves it none)
        log = cli.cwd / "dataflow.db.d" / "logs" / "job" / "1.1.log"

        def said() -> bool:
            return log.exists() and "job: batch 1 2 3 4\n" in log.read_text()

        wait_for(said, timeout=600, what="a batch running")
        ((driver,),) = rows(cli.cwd, "select distinct pid from run")
        os.kill(driver, signal.SIGKILL)
        out, err = drain.communicate(timeout=120)
    finally:
        if drain.poll() is None:
            drain.kill()
    assert drain.returncode == 1 and "with 4 chunks RUNNING" in err, out + err
    assert cli.ok("recover").out.count("abandoned") >= 1
    first = rows(cli.cwd, "select dataid, status, reason from run order by runid")
    assert first == [(d, "FAILED", "abandoned") for d in ("1", "2", "3", "4")]
    assert not list((data / "out_job").glob("dataid=*"))  # nothing published
    again = cli.runjob("--batch", "4", "./job.py", timeout=900)
    assert again.code == 0, again
    assert statuses(cli.cwd, "job") == {d: "READY" for d in chunks}
    assert not (data / "out_job" / "_attempts").exists()  # the dead batch's folders too


def test_a_spark_connect_client_drains_in_batches(cli, connect_server):
    chunks = {str(n): n for n in range(1, 7)}
    data = setup(cli, chunks, spark_remote=connect_server.url)
    env = {"JAVA_HOME": "/nonexistent-java", "POISON_CHUNK": "4"}  # no spark-submit
    done = cli.runjob("--batch", "6", "./job.py", env=env, timeout=900)
    assert done.code == 1, done
    assert statuses(cli.cwd, "job") == {d: "FAILED" if d == "4" else "READY" for d in chunks}
    runs = rows(cli.cwd, "select dataid, attempt, reason, pid, command from run order by runid")
    assert sorted(r[0] for r in runs) == sorted(chunks) and {r[1] for r in runs} == {1}
    assert len({r[3] for r in runs}) == 1  # one client claimed them all
    assert all("spark-submit" not in r[4] for r in runs)
    assert [r[2] for r in runs if r[2]] == ["ValueError: chunk 4 is poisoned"]
    log = (cli.cwd / "dataflow.db.d" / "logs" / "job" / "5.1.log").read_text()
    assert "job: batch 1 2 3 4 5 6" in log, log
    for dataid in chunks:
        if dataid != "4":
            _, files = chunk_files(data / "out_job", dataid)
            assert b"".join(files).count(b"\n") == chunks[dataid] + len(files), dataid


def test_a_fenced_chunk_of_a_batch_is_never_published(cli):
    chunks = {str(n): 2 for n in range(1, 4)}
    data = setup(cli, chunks)
    env = {**cli.env, "BATCH_SLEEP": "15"}
    drain = start_runjob(cli, "--batch", "3", "./job.py", env=env)
    try:
        running = "select count(*) from run where status = 'RUNNING'"
        wait_for(lambda: rows(cli.cwd, running)[0][0] == 3, timeout=600, what="a batch running")
        cli.ok("endjob", "job", "2", "FAILED", "--force")  # its run's finish is fenced off
        out, err = drain.communicate(timeout=600)
    finally:
        if drain.poll() is None:
            drain.kill()
    assert drain.returncode == 1, out + err  # a result refused
    assert statuses(cli.cwd, "job") == {"1": "READY", "2": "FAILED", "3": "READY"}
    for dataid in ("1", "3"):
        assert chunk_files(data / "out_job", dataid)[1], dataid
    assert not (data / "out_job" / chunk_folder("2")).exists()  # its attempt never published
    assert not (data / "out_job" / "_attempts").exists()  # and deleted


def test_a_batch_replaces_its_jdbc_chunks_in_one_delete(spark, postgres):
    from dataclasses import replace

    import dataflow.spark as df
    from dataflow.spark.batch import BatchDataset

    postgres.sql(
        "DROP TABLE IF EXISTS btgt; CREATE TABLE btgt (id int, note text, shard int NOT NULL);"
        "INSERT INTO btgt VALUES (1, 'old', 1), (2, 'old', 2), (3, 'keep', 3)"
    )
    base = postgres.dataset("btgt", "", itemtype="OUT")
    batch = BatchDataset("btgt", tuple(replace(base, dataid=d) for d in ("1", "2")))
    frame = spark.createDataFrame(
        [(10, "new", "1"), (11, "new", "1")], "id INT, note STRING, dataid STRING"
    )
    df.write(frame, batch)
    df.write(frame, batch)  # a rerun: replaced, not doubled; chunk 2 got no rows: empty
    table = postgres.sql("SELECT shard, id, note FROM btgt ORDER BY shard, id")
    assert table.splitlines() == ["1|10|new", "1|11|new", "3|3|keep"]
    back = df.read(spark, BatchDataset("btgt", tuple(replace(base, dataid=d) for d in ("1", "3"))))
    assert dict(back.dtypes)["dataid"] == "string"
    assert sorted((r["dataid"], r["id"]) for r in back.collect()) == [
        ("1", 10),
        ("1", 11),
        ("3", 3),
    ]


def test_a_job_with_run_batch_only_runs_one_chunk_alone_and_batches_of_20(cli):
    chunks = {str(n): 1 for n in range(1, 24)}
    data = setup(cli, chunks)
    script = cli.cwd / "job.py"
    script.write_text(re.sub(r"\ndef run\(spark, job\):\n(    .*\n)+", "", JOB))
    assert "def run(" not in script.read_text() and "def run_batch(" in script.read_text()
    one = cli.runjob("./job.py", timeout=900)  # one chunk: run_batch of that one
    assert one.code == 0, one
    assert statuses(cli.cwd, "job") == {"1": "READY"}
    rest = cli.runjob("--all", "./job.py", timeout=900)  # the default: 20 per call
    assert rest.code == 0, rest
    assert (
        set(statuses(cli.cwd, "job").values()) == {"READY"} and len(statuses(cli.cwd, "job")) == 23
    )
    logs = cli.cwd / "dataflow.db.d" / "logs" / "job"
    assert "job: batch 1\n" in (logs / "1.1.log").read_text()
    first = " ".join(str(n) for n in range(2, 22))
    assert f"job: batch {first}\n" in (logs / "2.1.log").read_text()
    assert "job: batch 22 23\n" in (logs / "23.1.log").read_text()
    assert chunk_files(data / "out_job", "23")[1]


def test_a_pipeline_folder_drain_passes_its_batch_to_each_job(cli):
    chunks = {str(n): 1 for n in range(1, 8)}
    setup(cli, chunks)
    etl = cli.cwd / "etl"
    etl.mkdir()
    (cli.cwd / "job.py").rename(etl / "job.py")
    cli.ok("register-dataset", "after_out")
    cli.ok("register-job", "after", "--in", "job_out", "--out", "after_out")
    script(etl, "after.sh", 'echo "$dataid" >> after.ledger')
    done = cli.runjob("--all", "--batch", "3", "./etl", timeout=900)
    assert done.code == 0, done
    assert statuses(cli.cwd, "job") == {d: "READY" for d in chunks}
    logs = cli.cwd / "dataflow.db.d" / "logs" / "job"
    assert "job: batch 1 2 3\n" in (logs / "1.1.log").read_text()
    assert "job: batch 4 5 6\n" in (logs / "4.1.log").read_text()
    assert "job: batch" not in (logs / "7.1.log").read_text()  # alone: its run
    assert sorted((cli.cwd / "after.ledger").read_text().split()) == sorted(chunks)
