"""Streaming: an item dropped into a stream's landing folder → its chunk READY.

One ``utility stream ./bench_stream.py`` (a real spark-submit, Structured Streaming with
a 1 s processing-time trigger) runs for the whole benchmark. Items are dropped one at a
time with ``utility drop`` as a user would; the latency of an item is from the moment
``utility drop`` has returned (the item is in the folder) to the moment the store says
its chunk is READY (read every 10 ms). The next item waits for that, then a random
0-1 s more, so that drops fall at every phase of the trigger. The trigger interval is
the baseline of the same run: a latency below one interval plus the batch's own work is
as good as a 1 s trigger allows.
"""

from __future__ import annotations

import contextlib
import os
import random
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import bench_serve
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
    write_script,
)

JOB = "bench_stream"
TRIGGER_S = 1.0
SPARK_ARGS = (
    "--master local[1] --conf spark.ui.enabled=false --conf spark.log.level=ERROR "
    "--conf spark.sql.shuffle.partitions=1"
)
STREAM = f"""\
from pyspark.sql import functions as F

import dataflow.spark as df


def clean(items):
    return items.where(F.trim("sku") != "").withColumn("qty", F.col("qty").cast("int"))


query = df.stream(clean, schema="item STRING, sku STRING, qty STRING", trigger="{TRIGGER_S:g} seconds")
print("watching", flush=True)
query.awaitTermination()
"""


def _ready(store: Path, dataid: str) -> bool:
    with contextlib.closing(sqlite3.connect(f"file:{store}?mode=ro", uri=True)) as conn:
        row = conn.execute(
            "SELECT count(*) FROM datastatus WHERE jobid = ? AND dataid = ? AND status = 'READY'",
            (JOB, dataid),
        ).fetchone()
    return row[0] == 1


def _wait(predicate, timeout: float, what: str, stream: subprocess.Popen, log: Path) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if stream.poll() is not None:
            raise RuntimeError(f"the stream exited {stream.returncode}: {log.read_text()[-2000:]}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out waiting for {what}")
        time.sleep(0.01)


def bench(config: Config, work: Path) -> Section:
    section = Section("streaming", "Streaming micro-batches as chunks")
    if not (VENV_BIN / "spark-submit").exists() or not shutil.which("java"):
        section.skip("item dropped → chunk READY", "spark-submit or java not found")
        return section
    items = 10 if config.quick else 40
    store = work / "dataflow.db"
    env = base_env(store)
    env.update(PYSPARK_PYTHON=sys.executable, SPARK_LOCAL_IP="127.0.0.1")
    utility = str(BIN / "utility")
    for argv in (
        ["createtables"],
        [
            "register-dataset",
            "landing",
            "--database",
            "csv",
            "--schemaname",
            str(work / "data"),
            "--tablename",
            "landing",
        ],
        [
            "register-dataset",
            "clean",
            "--database",
            "parquet",
            "--schemaname",
            str(work / "data"),
            "--tablename",
            "clean",
        ],
        [
            "register-job",
            JOB,
            "--in",
            "landing",
            "--out",
            "clean",
            "--set",
            f"spark_args={SPARK_ARGS}",
        ],
    ):
        check_output([utility, *argv], work, env)
    write_script(work / f"{JOB}.py", STREAM)
    log = work / "stream.log"
    outbox = work / "outbox"
    outbox.mkdir()
    pick = random.Random(13)  # the phases of the drops
    latencies: list[float] = []
    posted: list[float] = []
    with open(log, "wb") as out:
        stream = subprocess.Popen(
            [utility, "stream", f"./{JOB}.py"],
            cwd=work,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        started = time.perf_counter()
        _wait(lambda: b"watching" in log.read_bytes(), 600, "the stream", stream, log)
        print(f"  stream started in {time.perf_counter() - started:.1f} s")
        for n in range(items):
            item = outbox / f"item-{n:04d}.csv"
            item.write_text(f"item,sku,qty\n{n},sku{n},{n % 7 + 1}\n{n},,1\n")
            check_output([utility, "drop", "landing", str(item)], work, env)
            dropped = time.perf_counter()
            _wait(lambda n=n: _ready(store, str(n)), 300, f"chunk {n}", stream, log)
            latencies.append(time.perf_counter() - dropped)
            time.sleep(pick.uniform(0, TRIGGER_S))
        if not bench_serve.available():  # the same stream, the items POSTed instead

            def ready(n: int) -> None:
                _wait(lambda: _ready(store, str(n)), 300, f"chunk {n}", stream, log)

            posted = bench_serve.posted_to_ready(
                work, env, range(items, 2 * items),
                lambda n: f"item,sku,qty\n{n},sku{n},{n % 7 + 1}\n{n},,1\n", ready,
                lambda: time.sleep(pick.uniform(0, TRIGGER_S)),
            )  # fmt: skip
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(stream.pid, signal.SIGTERM)
        try:
            stream.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(stream.pid, signal.SIGKILL)
            stream.wait(timeout=60)
    dist = Dist.of(latencies)
    print(f"  {items} items: p50 {ms(dist.median)}, p95 {ms(dist.p95)}")
    section.add(
        Row(
            section.title,
            f"item dropped (`utility drop`) → its chunk READY, {TRIGGER_S:g} s trigger",
            ms(dist.median),
            ms(dist.p95),
            "",
            "",
            f"{items} items, one micro-batch and one chunk each; ÷ trigger interval: "
            f"p50 {dist.median / TRIGGER_S:.2f}×, p95 {dist.p95 / TRIGGER_S:.2f}×; "
            f"fastest {ms(min(latencies))}, slowest {ms(max(latencies))}",
        )
    )
    if posted:
        over_http = Dist.of(posted)
        print(f"  {items} items POSTed: p50 {ms(over_http.median)}, p95 {ms(over_http.p95)}")
        section.add(
            Row(
                section.title,
                f"item POSTed (`utility serve`) → its chunk READY, {TRIGGER_S:g} s trigger",
                ms(over_http.median),
                ms(over_http.p95),
                "",
                "",
                f"{items} items, from the POST's sending; ÷ the `utility drop` row: "
                f"p50 {over_http.median / dist.median:.2f}×, p95 {over_http.p95 / dist.p95:.2f}×",
            )
        )
    else:
        section.skip("item POSTed → its chunk READY", bench_serve.available())
    section.text(
        f"One `utility stream ./{JOB}.py` (spark-submit, Structured Streaming `foreachBatch`, "
        f"processing-time trigger {TRIGGER_S:g} s, `{SPARK_ARGS}`) runs throughout. "
        f"{items} CSV items of two rows (one dropped by the transformation) are dropped one "
        "at a time with `utility drop`; each latency runs from the return of `utility drop` "
        "to the store's READY for the item's chunk (polled every 10 ms). The next drop waits "
        "for that and then a random 0-1 s, so drops fall at every phase of the trigger. A "
        "micro-batch reads the item, applies the transformation, writes the chunk (Parquet), "
        "reads its row count back and records READY. Then as many items are POSTed one at "
        "a time to a `utility serve` beside the stream (same body, as `text/csv`), each "
        "latency from the POST's sending (its 202 included) to READY.",
    )
    return section
