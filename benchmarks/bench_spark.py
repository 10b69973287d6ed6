"""A Spark job through RunJob against the same ``spark-submit sparkjob.py`` run directly.

Pairs of runs, alternating which goes first; the figure is RunJob's wall time ÷ the
direct run's in the same pair. The job starts a local SparkSession, counts a small
range and stops: what RunJob adds should be lost in the JVM's start-up.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import stores
from measure import (
    BIN,
    VENV_BIN,
    Config,
    Dist,
    Row,
    Section,
    base_env,
    check_output,
    ms,
    paired,
    run_once,
    times,
    verdict,
    write_script,
)

TARGET = 1.03
WARMUP = 1
JOB = "sparkjob"
SCRIPT = "./sparkjob.py"

SPARK_JOB = """\
from pyspark.sql import SparkSession

spark = SparkSession.builder.master("local[1]").appName("bench").getOrCreate()
spark.sparkContext.setLogLevel("ERROR")
assert spark.range(1000).selectExpr("sum(id)").collect()[0][0] == 499500
spark.stop()
"""


def bench(config: Config, work: Path) -> Section:
    section = Section("spark", "Spark job through RunJob")
    submit = VENV_BIN / "spark-submit"
    if not submit.exists() or not shutil.which("java"):
        section.skip("RunJob ÷ direct spark-submit", "spark-submit or java not found")
        return section
    store_path = work / "dataflow.db"
    repeats = config.spark_repeats
    stores.single_job(store_path, JOB, chunks=repeats + WARMUP + 2).close()
    write_script(work / f"{JOB}.py", SPARK_JOB)  # RunJob runs it through spark-submit
    env = base_env(store_path)
    env.update(PYSPARK_PYTHON=sys.executable, SPARK_LOCAL_IP="127.0.0.1")
    direct = [str(submit), f"{JOB}.py"]
    through = [str(BIN / "RunJob"), SCRIPT]

    shown = check_output(through, work, env)
    if "rows updated to READY" not in shown:
        raise RuntimeError(f"RunJob {SCRIPT} did not complete: {shown!r}")
    seconds: dict[str, list[float]] = {"direct": [], "RunJob": []}
    for i in range(WARMUP + repeats):
        order = [("direct", direct), ("RunJob", through)]
        if i % 2:
            order.reverse()
        pair = {}
        for name, argv in order:
            run = run_once(argv, work, env)
            if run.code != 0:
                raise RuntimeError(f"{' '.join(argv)} exited {run.code}")
            pair[name] = run.seconds
            if i >= WARMUP:
                seconds[name].append(run.seconds)
        print(f"  pair {i + 1}: direct {pair['direct']:.2f} s, RunJob {pair['RunJob']:.2f} s")

    ratio = paired(seconds["RunJob"], seconds["direct"], lambda a, b: a / b)
    base, subject = Dist.of(seconds["direct"]), Dist.of(seconds["RunJob"])
    section.add(
        Row(
            section.title,
            f"`RunJob {SCRIPT}` ÷ `spark-submit {JOB}.py`, wall time",
            times(ratio.median),
            times(ratio.p95),
            f"≤ {TARGET:g}×",
            verdict(ratio.median <= TARGET),
            f"direct {ms(base.median)} (p95 {ms(base.p95)}); "
            f"through RunJob {ms(subject.median)} (p95 {ms(subject.p95)}); {repeats} pairs",
        )
    )
    section.text(
        f"{repeats} pairs after {WARMUP} warm-up pair, alternating which runs first. "
        f"`{JOB}.py` builds a `local[1]` SparkSession, sums a 1,000-row range and stops. "
        f"RunJob runs `{SCRIPT}`.",
    )
    return section
