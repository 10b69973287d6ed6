#!/usr/bin/env python3
"""Migration stage 1 (job ``extract``): one shard of the source table to landing Parquet.

The source is PostgreSQL through JDBC (the shard filter runs in the database, on its
index) or, on a machine without it, the embedded CSV source: the same code either way,
because where the shard lives is the dataset's metadata, not this script's business.

``run(spark, job)`` is the entry point: ``RunJob --all ./extract.py`` calls it for
every shard in one Spark driver (one JVM start-up for the whole drain).
"""

from dataflow.spark import context, read, write


def run(spark, job):
    write(read(spark, job.input("source_orders")), job.output("landing_orders"))
    rows = read(spark, job.output("landing_orders")).count()
    print(f"extract: shard {job.dataid}: {rows} rows landed")


if __name__ == "__main__":  # spark-submit extract.py, by hand, with a chunk's environment
    ctx = context()
    run(ctx.session(), ctx)
