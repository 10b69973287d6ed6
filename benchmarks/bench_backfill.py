"""``BENCH_ONLY=backfill``: a realistic Spark backfill against its physical limit.

The job reads a day's CSV chunk of orders, casts and cleans it, broadcast-joins a small
customer dimension and aggregates per customer, writing Parquet. The limit is one
hand-written spark-submit that reads every chunk at once (``dataid`` a partition column)
and writes them with ``partitionBy("dataid")``: what no per-chunk tool can beat. Beside
it, in the same run and on the same data and Spark options:

- ``RunJob --all ./orders.py`` with ``run_batch`` (K chunks per query, the default);
- the same drain with ``--batch 1`` (one query per chunk);
- one spark-submit per chunk (``RunJob ./orders.py`` a few times, per chunk);
- an idle cron tick: ``RunJob --all ./orders.py`` with nothing to claim ÷ ``RunJob
  ./idle.sh`` with nothing to claim.

Every drain's output is checked equal to the limit's, dataid by dataid.

``BENCH_K=1,5,10,20,40``: a sweep of the batch size instead (how the default K was
chosen): at both shapes, the limit and ``RunJob --all --batch K`` for each K, their order
turned round by round; each figure with the 1-minute load average at its runs.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
import time
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
    load_average,
    ms,
    paired,
    run_once,
    times,
    verdict,
    write_script,
)

TITLE = "Spark backfill ÷ its one-query limit"
SPARK_ARGS = (
    "--master local[2] --driver-memory 2g --conf spark.ui.enabled=false "
    "--conf spark.log.level=ERROR --conf spark.sql.shuffle.partitions=4"
)
SIZES = {  # (chunks, rows per chunk): the two shapes
    "small chunks": (120, 20_000),
    "large chunks": (40, 400_000),
}
TARGETS = {"small chunks": 1.15, "large chunks": 1.05}
IDLE_TARGET = 1.5
ALONE = 3  # chunks run through a spark-submit each (the same start-up every time)
SCHEMA = "order_id STRING, customer STRING, sku STRING, amount STRING, ts STRING"

TRANSFORM = f'''
from pyspark.sql import functions as F

SCHEMA = "{SCHEMA}"


def totals(orders, customers):
    clean = (
        orders.withColumn("amount", F.expr("try_cast(amount AS double)"))
        .where(F.col("amount").isNotNull() & (F.col("amount") > 0))
        .withColumn("customer", F.upper(F.trim("customer")))
    )
    joined = clean.join(F.broadcast(customers), "customer", "left")
    return joined.groupBy("dataid", "customer", "region").agg(
        F.sum("amount").alias("total"), F.count("*").alias("orders")
    )


def customers(spark, path):
    return spark.read.option("header", "true").csv(path).withColumn(
        "customer", F.upper(F.trim("customer"))
    )
'''

JOB = (
    TRANSFORM
    + """
import os
from dataflow import spark as df


def run_batch(spark, batch):
    orders = df.read(spark, batch.input(), schema=SCHEMA)
    dims = customers(spark, os.environ["BENCH_CUSTOMERS"])
    df.write(totals(orders, dims), batch.output())


def run(spark, job):
    orders = df.read(spark, job.input(), schema=SCHEMA).withColumn("dataid", F.lit(job.dataid))
    dims = customers(spark, os.environ["BENCH_CUSTOMERS"])
    df.write(totals(orders, dims).drop("dataid"), job.output())
"""
)

LIMIT = (
    TRANSFORM
    + """
import sys
from pyspark.sql import SparkSession

spark = SparkSession.builder.getOrCreate()
spark.conf.set("spark.sql.sources.partitionColumnTypeInference.enabled", "false")
source, dims, target = sys.argv[1:4]
orders = spark.read.option("header", "true").schema(SCHEMA).csv(source)  # dataid: the folders
totals(orders, customers(spark, dims)).write.mode("overwrite").partitionBy("dataid").parquet(target)
"""
)

GENERATE = """
import sys
from pyspark.sql import SparkSession, functions as F

spark = SparkSession.builder.getOrCreate()
target, dims, chunks, rows = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
ids = spark.range(chunks * rows)
orders = ids.select(
    F.col("id").cast("string").alias("order_id"),
    F.concat(F.lit(" c"), (F.col("id") * 7919 % 500).cast("string")).alias("customer"),
    F.concat(F.lit("sku"), (F.col("id") % 97).cast("string")).alias("sku"),
    F.when(F.col("id") % 50 == 0, F.lit("n/a"))
    .otherwise(((F.col("id") * 31) % 10000 / 100).cast("string"))
    .alias("amount"),
    F.lit("2026-01-01T00:00:00").alias("ts"),
    F.format_string("2026-%04d", (F.col("id") / rows).cast("int")).alias("dataid"),
)
orders.repartition("dataid").write.mode("overwrite").partitionBy("dataid").option(
    "header", "true"
).csv(target)
spark.range(500).select(
    F.concat(F.lit("C"), F.col("id").cast("string")).alias("customer"),
    F.concat(F.lit("region-"), (F.col("id") % 5).cast("string")).alias("region"),
).coalesce(1).write.mode("overwrite").option("header", "true").csv(dims)
"""


def _spark_submit(script: Path, args: list[str], cwd: Path) -> float:
    """Seconds of one spark-submit of ``script``; its last error lines if it fails."""
    argv = [str(VENV_BIN / "spark-submit"), *SPARK_ARGS.split(), str(script), *args]
    start = time.perf_counter()
    done = subprocess.run(argv, cwd=cwd, env=_env(cwd / "unused.db"), capture_output=True)
    if done.returncode != 0:
        tail = done.stderr.decode(errors="replace").strip().splitlines()[-12:]
        raise RuntimeError(
            f"spark-submit {script.name} exited {done.returncode}: " + "\n".join(tail)
        )
    return time.perf_counter() - start


def _env(store: Path, extra: dict[str, str] | None = None) -> dict[str, str]:
    env = base_env(store)
    env.update(PYSPARK_PYTHON=sys.executable, SPARK_LOCAL_IP="127.0.0.1", **(extra or {}))
    env.pop("SPARK_REMOTE", None)
    return env


def _drain_store(folder: Path, lake: Path, dataids: list[str], out: str) -> Path:
    folder.mkdir(parents=True)
    path = folder / "dataflow.db"
    store = stores.create(path)
    with store.transaction():
        conn = store.conn
        for datasetid, database, table in (("orders", "csv", "orders"), ("totals", "parquet", out)):
            conn.execute(
                "INSERT INTO dataset(datasetid, database, schemaname, tablename) VALUES (?,?,?,?)",
                (datasetid, database, str(lake), table),
            )
        for itemtype, value in (("IN", "orders"), ("OUT", "totals")):
            conn.execute(
                "INSERT INTO job(jobid, itemtype, datasetid) VALUES ('orders', ?, ?)",
                (itemtype, value),
            )
        conn.execute(
            "INSERT INTO job(jobid, itemtype, itemvalue) VALUES ('orders', 'spark_args', ?)",
            (SPARK_ARGS,),
        )
        conn.executemany(
            "INSERT INTO datastatus(datasetid, jobid, dataid, locktype, status) "
            "VALUES ('orders', 'source', ?, 'OUT', 'READY')",
            [(d,) for d in dataids],
        )
    store.close()
    write_script(folder / "orders.py", JOB)
    return path


def _ready(path: Path) -> int:
    with sqlite3.connect(path) as conn:
        return conn.execute("SELECT count(*) FROM run WHERE status = 'READY'").fetchone()[0]


def _rows(folder: Path) -> list[tuple]:
    import pyarrow.parquet as pq

    files = sorted(folder.glob("*.parquet"))
    found = []
    for file in files:
        table = pq.read_table(file).select(["customer", "region", "total", "orders"])
        found += [
            (r["customer"], r["region"], round(r["total"], 6), r["orders"])
            for r in table.to_pylist()
        ]
    return sorted(found)


def _same(a: Path, b: Path, dataids: list[str]) -> bool:
    return all(_rows(a / f"dataid={d}") == _rows(b / f"dataid={d}") for d in dataids)


def bench(config: Config, work: Path) -> Section:
    section = Section("backfill", TITLE)
    if not (VENV_BIN / "spark-submit").exists() or not shutil.which("java"):
        section.skip("every backfill figure", "spark-submit or java not found")
        return section
    rounds = 1 if config.quick else 3
    sweep = [int(k) for k in os.environ.get("BENCH_K", "").split(",") if k.strip()]
    for shape, (chunks, rows) in SIZES.items():
        if config.quick:
            chunks, rows = chunks // 4, rows // 20
        folder = work / shape.replace(" ", "-")
        if sweep:
            _sweep(section, folder, shape, chunks, rows, rounds, sweep)
        else:
            _shape(section, folder, shape, chunks, rows, rounds)
    if not sweep:
        _idle(section, work / "idle")
    section.text(
        "The job: read a chunk of CSV orders, cast and clean, broadcast-join a 500-row "
        "customer dimension, aggregate per customer, write Parquet. The limit: one "
        'spark-submit reading every chunk at once and writing with `partitionBy("dataid")`. '
        f"Spark options for all: `{SPARK_ARGS}`. Whole processes (a driver's start-up "
        f"included), interleaved over {rounds} rounds (the limit run before the drains in "
        "one round, after them in the next); outputs checked equal per dataid."
    )
    return section


def _generate(work: Path, chunks: int, rows: int) -> tuple[Path, Path, list[str]]:
    """The orders (``lake/orders``, a chunk per dataid), the dimension, the dataids."""
    work.mkdir(parents=True)
    lake, dims = work / "lake", work / "customers"
    _spark_submit(
        write_script(work / "generate.py", GENERATE),
        [str(lake / "orders"), str(dims), str(chunks), str(rows)],
        work,
    )
    dataids = sorted(p.name.split("=", 1)[1] for p in (lake / "orders").glob("dataid=*"))
    if len(dataids) != chunks:
        raise RuntimeError(f"generated {len(dataids)} chunks, not {chunks}")
    return lake, dims, dataids


def _drain(
    work: Path, lake: Path, dims: Path, dataids: list[str], name: str, options: list[str]
) -> float:
    """Seconds of ``RunJob --all OPTIONS ./orders.py`` over every chunk, written into
    table ``name`` of the lake; every chunk must end READY."""
    folder = work / name
    path = _drain_store(folder, lake, dataids, name)
    argv = [str(BIN / "RunJob"), "--all", *options, "./orders.py"]
    run = run_once(argv, folder, _env(path, {"BENCH_CUSTOMERS": str(dims)}))
    if run.code != 0 or _ready(path) != len(dataids):
        raise RuntimeError(f"{name}: exited {run.code}, {_ready(path)} of {len(dataids)} READY")
    return run.seconds


def _sweep(
    section: Section, work: Path, shape: str, chunks: int, rows: int, rounds: int, ks: list[int]
) -> None:
    """The limit and ``RunJob --all --batch K`` for each K, each figure with its load."""
    lake, dims, dataids = _generate(work, chunks, rows)
    limit_script = write_script(work / "limit.py", LIMIT)
    limits: list[float] = []
    seconds: dict[int, list[float]] = {k: [] for k in ks}
    loads: dict[int, list[float]] = {k: [] for k in ks}
    for r in range(rounds):
        target = lake / f"limit{r}"
        limits.append(
            _spark_submit(limit_script, [str(lake / "orders"), str(dims), str(target)], work)
        )
        for k in ks[r % len(ks) :] + ks[: r % len(ks)]:  # turned round by round
            loads[k].append(load_average())
            name = f"k{k}r{r}"
            seconds[k].append(_drain(work, lake, dims, dataids, name, ["--batch", str(k)]))
            loads[k].append(load_average())
            took, limit = seconds[k][-1], limits[-1]
            said = f"{took:.1f} s, limit {limit:.1f} s ({took / limit:.2f}×)"
            print(f"   {shape} K={k} round {r + 1}: {said}, load {loads[k][-2]:.1f}", flush=True)
            if not _same(lake / name, target, dataids):
                raise RuntimeError(f"--batch {k}: output differs from the limit's")
    for k in ks:
        ratio = paired(seconds[k], limits, lambda a, b: a / b)
        each = ", ".join(f"{a / b:.2f}×" for a, b in zip(seconds[k], limits, strict=True))
        section.add(
            Row(
                TITLE,
                f"{shape}: `RunJob --all --batch {k}` ÷ limit",
                times(ratio.median),
                times(ratio.p95),
                "report",
                "",
                f"{chunks} × {rows:,} rows; rounds {each}; {Dist.of(seconds[k]).median:.1f} s "
                f"against {Dist.of(limits).median:.1f} s; load {min(loads[k]):.1f}–"
                f"{max(loads[k]):.1f}",
            )
        )


def _shape(section: Section, work: Path, shape: str, chunks: int, rows: int, rounds: int) -> None:
    lake, dims, dataids = _generate(work, chunks, rows)
    limit_script = write_script(work / "limit.py", LIMIT)
    times_: dict[str, list[float]] = {"limit": [], "batch": [], "one": [], "submit": []}
    loads = []
    for r in range(rounds):
        loads.append(load_average())
        target = lake / f"limit{r}"

        def limit(target: Path = target) -> None:
            times_["limit"].append(
                _spark_submit(limit_script, [str(lake / "orders"), str(dims), str(target)], work)
            )

        def drains(r: int = r) -> None:
            for kind, options in (("batch", []), ("one", ["--batch", "1"])):
                times_[kind].append(_drain(work, lake, dims, dataids, f"{kind}{r}", options))

        for step in (limit, drains) if r % 2 == 0 else (drains, limit):  # no order favoured
            step()
        for kind in ("batch", "one"):
            if not _same(lake / f"{kind}{r}", target, dataids):
                raise RuntimeError(f"{kind}: output differs from the limit's")
        folder = work / f"submit{r}"
        path = _drain_store(folder, lake, dataids[:ALONE], f"submit{r}")
        seconds = 0.0
        for _ in range(ALONE):
            run = run_once(
                [str(BIN / "RunJob"), "./orders.py"],
                folder,
                _env(path, {"BENCH_CUSTOMERS": str(dims)}),
            )
            if run.code != 0:
                raise RuntimeError(f"RunJob ./orders.py exited {run.code} in {folder}")
            seconds += run.seconds
        times_["submit"].append(seconds / ALONE * chunks)  # as if every chunk ran so
        loads.append(load_average())
    limit = Dist.of(times_["limit"])
    note = f"{chunks} × {rows:,} rows; limit {limit.median:.1f} s; load {min(loads):.1f}–{max(loads):.1f}"
    for kind, figure, target in (
        ("batch", "`RunJob --all` (batches of the default K) ÷ limit", TARGETS[shape]),
        ("one", "`RunJob --all --batch 1` (a query per chunk) ÷ limit", None),
        ("submit", "one spark-submit per chunk ÷ limit", None),
    ):
        ratio = paired(times_[kind], times_["limit"], lambda a, b: a / b)
        section.add(
            Row(
                TITLE,
                f"{shape}: {figure}",
                times(ratio.median),
                times(ratio.p95),
                f"≤ {target:g}×" if target else "report",
                verdict(ratio.median <= target) if target else "",
                f"{note}; {Dist.of(times_[kind]).median:.1f} s",
            )
        )


def _idle(section: Section, work: Path) -> None:
    """An idle cron tick of a Spark drain costs what a shell job's does."""
    path = _drain_store(work, work / "lake", [], "out")
    write_script(work / "idle.sh", "#!/bin/sh\nexit 0\n")
    store = stores.create(path)
    with store.transaction():
        stores.register(store, "idle", ["orders"], ["idle_out"])
    store.close()
    env = _env(path)
    spark, shell = [], []
    for _ in range(10):
        for argv, into in (
            ([str(BIN / "RunJob"), "--all", "./orders.py"], spark),
            ([str(BIN / "RunJob"), "./idle.sh"], shell),
        ):
            run = run_once(argv, work, env)
            if run.code != 0:
                raise RuntimeError(f"{' '.join(argv)} exited {run.code}")
            into.append(run.seconds)
    ratio = paired(spark, shell, lambda a, b: a / b)
    section.add(
        Row(
            TITLE,
            "idle tick: `RunJob --all ./orders.py` ÷ `RunJob ./idle.sh`, nothing to claim",
            times(ratio.median),
            times(ratio.p95),
            f"≤ {IDLE_TARGET:g}×",
            verdict(ratio.median <= IDLE_TARGET),
            f"{ms(Dist.of(spark).median)} against {ms(Dist.of(shell).median)}",
        )
    )
