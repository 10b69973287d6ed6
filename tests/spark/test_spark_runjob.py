"""End to end: RunJob ./job.py through a real spark-submit, and a rerun that rewrites its
chunk and nothing else."""

from __future__ import annotations

import re
from pathlib import Path

from dataflow import crypto
from dataflow.spark import Dataset, read, write
from support import rows

STAMP = r"\w{3} \w{3} [ \d]\d \d\d:\d\d:\d\d [AP]M \S* ?\d{4}"
PASSKEY, PASSWORD = "test-passkey", "s3cret pass"
SPARK_ARGS = (
    "--master local[1] --conf spark.ui.enabled=false --conf spark.ui.showConsoleProgress=false "
    "--conf spark.log.level=ERROR --conf spark.dataflow.marker=setting"
)
JOB = """\
import os
from pyspark.sql import functions as F
from dataflow.spark import context, read, write

ctx = context()
spark = ctx.session()
numbers = ctx.input("numbers")
doubled = read(spark, numbers).withColumn("doubled", F.col("n") * 2)
write(doubled, ctx.output())
print(
    f"job: {ctx.jobid} chunk {ctx.dataid}: {doubled.count()} rows,",
    f"master {spark.sparkContext.master},",
    f"marker {spark.conf.get('spark.dataflow.marker')},",
    f"password ok {numbers.password == os.environ['EXPECTED_PASSWORD']},",
    f"passkey hidden {'PASSKEY' not in os.environ}",
)
"""


def numbers(data: Path, dataid: str) -> Dataset:
    return Dataset("numbers", dataid, database="parquet", schemaname=str(data), tablename="numbers")


def doubled(data: Path, dataid: str) -> Dataset:
    return Dataset("doubled", dataid, database="file:", schemaname=str(data), tablename="doubled")


def files(folder: Path) -> dict[str, float]:
    return {p.name: p.stat().st_mtime_ns for p in folder.iterdir()}


def test_runjob_py_runs_spark_submit_and_a_rerun_replaces_only_its_chunk(cli, spark, tmp_path):
    data = tmp_path / "data"
    secret = crypto.encrypt(PASSWORD, PASSKEY)
    cli.ok("createtables")
    cli.ok(
        "dml",
        "insert into dataset values "
        f"('numbers', '', 'parquet', '{data}', 'numbers', 'etl', '{secret}'), "
        f"('doubled', '', 'file:', '{data}', 'doubled', '', '')",
    )
    cli.ok(
        "dml",
        "insert into job (jobid, itemtype, datasetid, itemvalue) values "
        "('job', 'IN', 'numbers', null), ('job', 'OUT', 'doubled', null), "
        f"('job', 'spark_args', null, '{SPARK_ARGS}')",
    )
    for dataid in ("1", "2"):
        write(spark.createDataFrame([(1,), (2,), (3,)], "n INT"), numbers(data, dataid))
        cli.ok(
            "dml",
            f"insert into datastatus values ('numbers','feed','{dataid}','OUT','READY',now())",
        )
    job = cli.cwd / "job.py"
    job.write_text(JOB)
    job.chmod(0o644)  # spark-submit reads a .py job: it need not be executable
    env = {
        "PASSKEY": PASSKEY,
        "EXPECTED_PASSWORD": PASSWORD,
        "DATAFLOW_SPARK_ARGS": cli.env["DATAFLOW_SPARK_ARGS"]
        + " --conf spark.dataflow.marker=environment",
    }

    first = cli.runjob("./job.py", env=env, timeout=300)
    assert first.code == 0, first
    lines = first.lines
    assert re.fullmatch(f"{STAMP}: Launching ./job.py with dataid 1", lines[0])
    assert (
        "job: job chunk 1: 3 rows, master local[1], marker environment, password ok True, "
        "passkey hidden True"
    ) in lines
    assert re.fullmatch(f"{STAMP}: Job ./job.py is complete. Updating status", lines[-2])
    assert lines[-1] == "1 rows updated to READY for job and 1 1 IN file-local locks released"
    assert PASSWORD not in first.out + first.err

    # chunk 2 of the output, as an earlier run would have left it
    write(spark.createDataFrame([(7, 14)], "n INT, doubled INT"), doubled(data, "2"))
    chunk2 = files(data / "doubled" / "dataid=2")
    # the feed redelivers chunk 1; the operator resubmits it
    write(spark.createDataFrame([(10,), (20,)], "n INT"), numbers(data, "1"))
    cli.ok("endjob", "job", "1", "RESUBMIT")

    rerun = cli.runjob("./job.py", env=env, timeout=300)
    assert rerun.code == 0, rerun
    assert re.fullmatch(f"{STAMP}: Launching ./job.py with dataid 1", rerun.lines[0])
    rows = read(spark, doubled(data, "1")).collect()
    assert sorted((r.n, r.doubled) for r in rows) == [(10, 20), (20, 40)]  # replaced, not added
    assert files(data / "doubled" / "dataid=2") == chunk2  # the other chunk: not touched
    assert sorted(read(spark, doubled(data, "2")).collect()) == [(7, 14)]
    runs = cli.ok("sql", "select dataid, status from datastatus where jobid = 'job'", "--json")
    assert '"status": "READY"' in runs.out and "RUNNING" not in runs.out


WRAPPER = """\
#!/usr/bin/env bash
# a shell job that calls spark-submit itself, as before .py jobs were run by RunJob
exec spark-submit --master 'local[1]' --conf spark.ui.enabled=false \\
    --conf spark.log.level=ERROR "$(dirname "$0")/driver.py" "$@"
"""
DRIVER = """\
from dataflow.spark import context

ctx = context()
spark = ctx.session()
print(f"driver: chunk {ctx.dataid} of {ctx.input().datasetid}, {spark.range(5).count()} rows")
"""


def test_a_shell_job_that_calls_spark_submit_itself_keeps_working(cli):
    cli.ok("createtables")
    cli.ok("dml", "insert into dataset (datasetid) values ('bobin'), ('bobout')")
    cli.ok(
        "dml",
        "insert into job (jobid, itemtype, datasetid) values "
        "('wrapped', 'IN', 'bobin'), ('wrapped', 'OUT', 'bobout')",
    )
    cli.ok("dml", "insert into datastatus values ('bobin', 'feed', '1.0', 'OUT', 'READY', now())")
    (cli.cwd / "driver.py").write_text(DRIVER)
    wrapper = cli.cwd / "wrapped.sh"
    wrapper.write_text(WRAPPER)
    wrapper.chmod(0o755)
    result = cli.runjob("./wrapped.sh", timeout=300)
    assert result.code == 0, result
    assert "driver: chunk 1.0 of bobin, 5 rows" in result.lines
    assert result.lines[-1] == (
        "1 rows updated to READY for wrapped and 1.0 1 IN file-local locks released"
    )


FAILING = """\
from dataflow.spark import context

spark = context().session()
print("rows", spark.range(3).count())
raise ValueError("the feed sent no header")
"""


def test_a_failed_py_job_names_its_exception_and_spark_logs_only_warnings(cli, tmp_path):
    """Spark's ~130 INFO lines no longer bury the traceback (WARN unless the operator asks
    for more), and the history's reason is the traceback's last line, not 'exit code 1'."""
    cli.ok("createtables")
    cli.ok("register-dataset", "src")
    cli.ok("register-dataset", "dst")
    cli.ok("register-job", "fails", "--in", "src", "--out", "dst")
    cli.ok(
        "dml",
        "insert into job (jobid, itemtype, itemvalue) values "
        "('fails', 'spark_args', '--master local[1] --conf spark.ui.enabled=false')",
    )
    cli.ok("ready", "src", "1", "2")
    (tmp_path / "fails.py").write_text(FAILING)

    failed = cli.runjob("./fails.py", timeout=300)
    assert failed.code == 1, failed
    assert "rows 3" in failed.out and "ValueError: the feed sent no header" in failed.out
    (reason, log), *_ = rows(tmp_path, "select reason, logpath from run where dataid = '1'")
    assert reason == "ValueError: the feed sent no header (exit code 1)"
    text = Path(log).read_text()
    assert "rows 3" in text and "Traceback (most recent call last):" in text
    # the first lines come before SparkContext reads spark.log.level
    assert text.count(" INFO ") <= 5, text[:3000]

    loud = {"DATAFLOW_SPARK_ARGS": cli.env["DATAFLOW_SPARK_ARGS"] + " --conf spark.log.level=INFO"}
    assert cli.runjob("./fails.py", env=loud, timeout=300).code == 1
    (log,) = rows(tmp_path, "select logpath from run order by runid desc limit 1")[0]
    assert Path(log).read_text().count(" INFO ") > 20
