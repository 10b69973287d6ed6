"""RunJob ./job.py on a real Spark standalone cluster (master and worker started by the
``standalone`` fixture): the chunk read and written through ``dataflow.spark`` by
executors of the cluster, the application's id in the history, a failure recorded with
the driver's own exit code, and a SIGTERM of RunJob that leaves no application running
on the master."""

from __future__ import annotations

import re
import signal
import time

from dataflow.spark import Dataset, read, write
from support import history, start_runjob, statuses, wait_for

JOB = """\
import sys, time
from pyspark.sql import functions as F
from dataflow.spark import context, read, write

ctx = context()
spark = ctx.session()
sc = spark.sparkContext
print(f"job: chunk {ctx.dataid} on {sc.master} as {sc.applicationId}", flush=True)
if ctx.item("sleep"):
    time.sleep(float(ctx.item("sleep")))
numbers = read(spark, ctx.input())
if ctx.dataid == "2":
    sys.exit(3)  # a job that fails after it has started on the cluster
write(numbers.withColumn("doubled", F.col("n") * 2), ctx.output())
"""


def spark_args(standalone) -> str:
    return (
        f"--master {standalone.url} --conf spark.executor.memory=512m --conf spark.cores.max=1 "
        "--conf spark.ui.enabled=false --conf spark.sql.shuffle.partitions=1 "
        # executors start quicker, as the tests' drivers do (see conftest.quick_jvm)
        '--conf "spark.executor.extraJavaOptions=-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"'
    )


def register(cli, spark, data, standalone, dataids, sleep=None, job="job") -> None:
    cli.ok("createtables")
    cli.ok(
        "dml",
        "insert into dataset values "
        f"('numbers', '', 'parquet', '{data}', 'numbers', '', ''), "
        f"('doubled', '', 'parquet', '{data}', 'doubled', '', '')",
    )
    cli.ok(
        "dml",
        "insert into job (jobid, itemtype, datasetid, itemvalue) values "
        f"('{job}', 'IN', 'numbers', null), ('{job}', 'OUT', 'doubled', null), "
        f"('{job}', 'spark_args', null, '{spark_args(standalone)}')"
        + (f", ('{job}', 'sleep', null, '{sleep}')" if sleep else ""),
    )
    for dataid in dataids:
        numbers = Dataset(
            "numbers", dataid, database="parquet", schemaname=str(data), tablename="numbers"
        )
        write(spark.createDataFrame([(1,), (2,), (3,)], "n INT"), numbers)
        cli.ok(
            "dml",
            f"insert into datastatus values ('numbers','feed','{dataid}','OUT','READY',now())",
        )
    script = cli.cwd / f"{job}.py"
    script.write_text(JOB)
    script.chmod(0o755)


def printed_apps(text: str) -> dict[str, str]:
    """dataid -> application id, as the job printed them."""
    return dict(re.findall(r"job: chunk (\S+) on spark://\S+ as (app-\S+)", text))


def logs(cli) -> str:
    return "".join(p.read_text() for p in sorted((cli.cwd / "dataflow.db.d").rglob("*.log")))


def test_runjob_runs_on_the_cluster_and_records_the_application(cli, spark, standalone, tmp_path):
    data = tmp_path / "data"
    register(cli, spark, data, standalone, ["1", "2"])
    result = cli.runjob("--all", "./job.py", timeout=600)
    assert result.code == 1, result  # chunk 2 failed
    assert statuses(tmp_path, "job") == {"1": "READY", "2": "FAILED"}

    apps = printed_apps(logs(cli))
    assert set(apps) == {"1", "2"}, logs(cli)
    assert history(tmp_path, "job") == [
        ("1", 1, "READY", 0, None, f"spark application {apps['1']}"),
        ("2", 1, "FAILED", 3, None, f"exit code 3; spark application {apps['2']}"),
    ]
    doubled = Dataset("doubled", "1", database="parquet", schemaname=str(data), tablename="doubled")
    assert sorted(tuple(r) for r in read(spark, doubled).collect()) == [(1, 2), (2, 4), (3, 6)]
    assert not (data / "doubled" / "dataid=2").exists()
    # the master ran both, and runs neither any more
    for dataid, app in apps.items():
        kind, seen = standalone.app(app)
        assert (kind, seen["name"]) == ("completedapps", f"job {dataid}")


def test_sigterm_of_runjob_leaves_no_application_on_the_cluster(cli, spark, standalone, tmp_path):
    register(cli, spark, tmp_path / "data", standalone, ["1"], sleep="600", job="sleepy")
    runjob = start_runjob(cli, "./sleepy.py")
    try:
        wait_for(lambda: standalone.active("sleepy 1"), timeout=300, what="the application")
        (app,) = standalone.active("sleepy 1")
        assert app["state"] == "RUNNING"
        runjob.send_signal(signal.SIGTERM)
        out, err = runjob.communicate(timeout=120)
    finally:
        if runjob.poll() is None:
            runjob.kill()
    assert runjob.returncode == 128 + signal.SIGTERM, (out, err)
    assert statuses(tmp_path, "sleepy") == {"1": "FAILED"}
    ((_, _, status, _, signalled, reason),) = history(tmp_path, "sleepy")
    assert (status, signalled) == ("FAILED", "SIGTERM")
    assert reason == f"interrupted by SIGTERM; spark application {app['id']}"
    deadline = time.monotonic() + 60
    while standalone.active("sleepy 1") and time.monotonic() < deadline:
        time.sleep(0.5)
    assert standalone.app(app["id"])[0] == "completedapps"
    assert standalone.state()["activeapps"] == []
