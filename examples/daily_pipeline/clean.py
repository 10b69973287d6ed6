#!/usr/bin/env python3
"""Stage 2 (job ``clean``): raw orders of the day through the pipeline ``pipelines/clean``
(drop invalid rows, normalise, deduplicate: each step tested by ``utility validate``)."""

from pathlib import Path

from dataflow.pipeline import Pipeline
from dataflow.spark import context, read, write

HERE = Path(__file__).resolve().parent

ctx = context()
spark = ctx.session()
clean = Pipeline.load(HERE / "pipelines" / "clean").run(read(spark, ctx.input()))
write(clean, ctx.output())
print(f"clean: {clean.count()} valid orders for {ctx.dataid}")
