#!/usr/bin/env python3
"""Migration stage 2 (job ``load``): a landed shard, typed, into the lake table.

``CHAOS_SHARD=<n>`` makes shard n fail, standing in for the 1% of jobs that fail on a
busy cluster (seed 001): the chunk ends FAILED, the others go on, and a RESUBMIT
reruns it later with nothing to clean up.

``run(spark, job)`` is the entry point: ``RunJob --all ./load.py`` calls it for every
shard in one Spark driver.
"""

import os

from pyspark.sql import functions as F

from dataflow.spark import context, read, write

TARGET = [
    ("order_id", "bigint"),
    ("shard", "int"),
    ("customer", "string"),
    ("amount", "decimal(10,2)"),
    ("ordered_at", "timestamp"),
]


def run(spark, job):
    if os.environ.get("CHAOS_SHARD") == job.dataid:
        raise SystemExit(f"load: shard {job.dataid}: simulated failure (CHAOS_SHARD)")
    landed = read(spark, job.input("landing_orders"))
    typed = landed.select(*[F.col(name).cast(kind).alias(name) for name, kind in TARGET])
    write(typed, job.output("lake_orders"))
    print(f"load: shard {job.dataid} loaded")


if __name__ == "__main__":  # spark-submit load.py, by hand, with a chunk's environment
    ctx = context()
    run(ctx.session(), ctx)
