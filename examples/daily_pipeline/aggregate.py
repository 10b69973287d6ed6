#!/usr/bin/env python3
"""Stage 3 (job ``aggregate``): a day's clean orders to totals per store, in Parquet."""

from pathlib import Path

from dataflow.pipeline import Pipeline
from dataflow.spark import context, read, write

HERE = Path(__file__).resolve().parent

ctx = context()
spark = ctx.session()
totals = Pipeline.load(HERE / "pipelines" / "aggregate").run(read(spark, ctx.input()))
write(totals, ctx.output())
print(f"aggregate: {totals.count()} stores for {ctx.dataid}")
