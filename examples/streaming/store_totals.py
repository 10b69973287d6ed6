#!/usr/bin/env python3
"""The downstream batch job (job ``store_totals``): one chunk of clean orders, whatever
made it (a day of the daily pipeline, or a micro-batch of the stream), to totals per
store with the daily pipeline's ``aggregate`` transformations.

``RunJob --all ./store_totals.py``: one Spark driver for every chunk waiting.
"""

from pathlib import Path

from dataflow import spark as df
from dataflow.pipeline import Pipeline

HERE = Path(__file__).resolve().parent
per_store = Pipeline.load(HERE.parent / "daily_pipeline" / "pipelines" / "aggregate")


def run(spark, job):
    totals = per_store.run(df.read(spark, job.input()))
    df.write(totals, job.output())
    for row in totals.orderBy("store").collect():
        print(f"store_totals: chunk {job.dataid}: {row.store} {row.orders} orders, "
              f"{row.units} units, {row.revenue} revenue")  # fmt: skip


if __name__ == "__main__":
    ctx = df.context()
    run(ctx.session(), ctx)
