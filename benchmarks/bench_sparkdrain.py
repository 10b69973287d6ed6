"""A drain of many small Spark chunks in one driver against the same chunks each through
its own spark-submit.

The job defines ``def run(spark, job)``: ``RunJob --all ./sparkdrain.py`` runs every
chunk in one Spark driver; ``RunJob ./sparkdrain.py`` runs one chunk through a
spark-submit of its own (what every chunk of a drain cost before). The figure is the
per-chunk wall time of the drain (its one driver start-up included) ÷ the per-chunk
wall time of the one-submit runs, measured in alternating rounds of the same run. The
one-submit baseline runs fewer chunks: each costs the same JVM start-up.
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
    ms,
    paired,
    run_once,
    times,
    verdict,
    write_script,
)

TARGET = 0.1
JOB = "sparkdrain"
SPARK_ARGS = "--master local[1] --conf spark.ui.enabled=false --conf spark.log.level=ERROR"

SPARK_JOB = """\
def run(spark, job):
    total = spark.range(1000).selectExpr("sum(id)").collect()[0][0]
    assert total == 499500, total
"""


def _store(folder: Path, chunks: int) -> Path:
    folder.mkdir(parents=True)
    path = folder / "dataflow.db"
    store = stores.single_job(path, JOB, chunks=chunks)
    with store.transaction():
        store.conn.execute(
            "INSERT INTO job(jobid, itemtype, itemvalue) VALUES (?, 'spark_args', ?)",
            (JOB, SPARK_ARGS),
        )
    store.close()
    write_script(folder / f"{JOB}.py", SPARK_JOB)
    return path


def _count_ready(path: Path) -> int:
    import sqlite3

    with sqlite3.connect(path) as conn:
        return conn.execute(
            "SELECT count(*) FROM run WHERE jobid = ? AND status = 'READY'", (JOB,)
        ).fetchone()[0]


def bench(config: Config, work: Path) -> Section:
    section = Section("sparkdrain", "Spark chunks in one driver")
    if not (VENV_BIN / "spark-submit").exists() or not shutil.which("java"):
        section.skip("drain ÷ one submit per chunk", "spark-submit or java not found")
        return section
    drained, alone = (10, 2) if config.quick else (50, 5)
    rounds = 1 if config.quick else 3
    per_chunk: dict[str, list[float]] = {"drain": [], "submit": []}
    for i in range(rounds):
        order = ["submit", "drain"] if i % 2 else ["drain", "submit"]
        for kind in order:
            chunks = drained if kind == "drain" else alone
            folder = work / f"{kind}{i}"
            path = _store(folder, chunks)
            env = base_env(path)
            env.update(PYSPARK_PYTHON=sys.executable, SPARK_LOCAL_IP="127.0.0.1")
            argv = [str(BIN / "RunJob"), *(["--all"] if kind == "drain" else []), f"./{JOB}.py"]
            seconds = 0.0
            for _ in range(1 if kind == "drain" else chunks):
                run = run_once(argv, folder, env)
                if run.code != 0:
                    raise RuntimeError(f"{' '.join(argv)} exited {run.code} in {folder}")
                seconds += run.seconds
            if _count_ready(path) != chunks:
                raise RuntimeError(f"{kind}: {_count_ready(path)} of {chunks} chunks READY")
            per_chunk[kind].append(seconds / chunks)
            print(f"  round {i + 1} {kind}: {chunks} chunks, {seconds / chunks:.2f} s per chunk")

    ratio = paired(per_chunk["drain"], per_chunk["submit"], lambda a, b: a / b)
    drain, submit = Dist.of(per_chunk["drain"]), Dist.of(per_chunk["submit"])
    section.add(
        Row(
            section.title,
            f"per chunk: `RunJob --all` ({drained} chunks, one driver) ÷ one spark-submit per chunk",
            times(ratio.median),
            times(ratio.p95),
            f"≤ {TARGET:g}×",
            verdict(ratio.median <= TARGET),
            f"one driver {ms(drain.median)} per chunk (p95 {ms(drain.p95)}); "
            f"one submit each {ms(submit.median)} (p95 {ms(submit.p95)}); {rounds} rounds",
        )
    )
    section.text(
        f"{rounds} rounds, alternating which runs first. The job `{JOB}.py` defines "
        "`run(spark, job)`, which sums a 1,000-row range: per round, `RunJob --all` drains "
        f"{drained} chunks in one Spark driver (its start-up included in the per-chunk "
        f"figure), and {alone} chunks each run through their own spark-submit "
        f"(`RunJob ./{JOB}.py` once per chunk). Spark arguments for both: `{SPARK_ARGS}`.",
    )
    return section
