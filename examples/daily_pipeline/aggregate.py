#!/usr/bin/env python3
"""Stage 3 (job ``aggregate``): a day's clean orders to totals per store, in Parquet.

``RunJob --all ./aggregate.py`` totals every waiting day, up to 20 per query
(``run_batch``: totals per day and store); ``RunJob ./aggregate.py`` the next day
alone (``run``).
"""

from pathlib import Path

from dataflow.pipeline import Pipeline
from dataflow.spark import context, read, write

HERE = Path(__file__).resolve().parent
TOTALS = Pipeline.load(HERE / "pipelines" / "aggregate")


def run_batch(spark, batch):
    totals = TOTALS.run(read(spark, batch.input())).cache()  # written, then counted
    write(totals, batch.output())
    counts = dict(totals.groupBy("dataid").count().collect())
    for day in batch.dataids:
        print(f"aggregate: {counts.get(day, 0)} stores for {day}")


def run(spark, job):
    totals = TOTALS.run(read(spark, job.input()))
    write(totals, job.output())
    print(f"aggregate: {totals.count()} stores for {job.dataid}")


if __name__ == "__main__":  # spark-submit aggregate.py, by hand, with a chunk's environment
    ctx = context()
    run(ctx.session(), ctx)
