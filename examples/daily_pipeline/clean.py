#!/usr/bin/env python3
"""Stage 2 (job ``clean``): raw orders of the day through the pipeline ``pipelines/clean``
(drop invalid rows, normalise, deduplicate: each step tested by ``utility validate``).

``RunJob --all ./clean.py`` cleans every waiting day, up to 20 per query
(``run_batch``: the transformations keep each row's ``dataid``, a day deduplicated on
its own); ``RunJob ./clean.py`` the next day alone (``run``).
"""

from pathlib import Path

from dataflow.pipeline import Pipeline
from dataflow.spark import context, read, write

HERE = Path(__file__).resolve().parent
CLEAN = Pipeline.load(HERE / "pipelines" / "clean")


def run_batch(spark, batch):
    clean = CLEAN.run(read(spark, batch.input())).cache()  # written, then counted
    write(clean, batch.output())
    counts = dict(clean.groupBy("dataid").count().collect())
    for day in batch.dataids:
        print(f"clean: {counts.get(day, 0)} valid orders for {day}")


def run(spark, job):
    clean = CLEAN.run(read(spark, job.input()))
    write(clean, job.output())
    print(f"clean: {clean.count()} valid orders for {job.dataid}")


if __name__ == "__main__":  # spark-submit clean.py, by hand, with a chunk's environment
    ctx = context()
    run(ctx.session(), ctx)
