#!/usr/bin/env python3
"""Migration stage 2 (job ``load``): a landed shard, typed, into the lake table.

``CHAOS_SHARD=<n>`` makes shard n fail, standing in for the 1% of jobs that fail on a
busy cluster (seed 001): the chunk ends FAILED, the others go on, and a RESUBMIT
reruns it later with nothing to clean up.

``run_batch(spark, batch)`` is the entry point: ``RunJob --all ./load.py`` calls it in
one Spark driver with up to 20 shards at a time (one Spark query for them all, each shard
still its own chunk); a batch that fails is split until only the shard that fails alone
is FAILED. ``run(spark, job)`` runs a shard alone (``RunJob ./load.py``).
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


def typed(landed, *keep):
    return landed.select(*[F.col(name).cast(kind).alias(name) for name, kind in TARGET], *keep)


def chaos(dataids):
    shard = os.environ.get("CHAOS_SHARD")
    if shard in dataids:
        raise SystemExit(f"load: shard {shard}: simulated failure (CHAOS_SHARD)")


def run_batch(spark, batch):
    chaos(batch.dataids)
    landed = read(spark, batch.input("landing_orders"))  # with a column dataid: the shard
    write(typed(landed, "dataid"), batch.output("lake_orders"))
    for dataid in batch.dataids:
        print(f"load: shard {dataid} loaded")


def run(spark, job):
    chaos([job.dataid])
    write(typed(read(spark, job.input("landing_orders"))), job.output("lake_orders"))
    print(f"load: shard {job.dataid} loaded")


if __name__ == "__main__":  # spark-submit load.py, by hand, with a chunk's environment
    ctx = context()
    run(ctx.session(), ctx)
