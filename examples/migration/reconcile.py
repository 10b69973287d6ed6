#!/usr/bin/env python3
"""Reconciliation: rows per shard in the source and in the lake, for every shard.

    reconcile.py [JDBC_JAR...]

Reads both datasets as registered in the store (PASSKEY decrypts the source's
password). Prints a summary and every shard that differs; exits 1 if any does.
"""

import sys

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from dataflow.dataids import natural_key
from dataflow.spark import read_all, registered

builder = SparkSession.builder.master("local[1]").appName("reconcile")
builder = builder.config("spark.ui.enabled", "false").config(
    "spark.ui.showConsoleProgress", "false"
)
builder = builder.config("spark.sql.shuffle.partitions", "1")
if sys.argv[1:]:
    builder = builder.config("spark.jars", ",".join(sys.argv[1:]))
spark = builder.getOrCreate()
spark.sparkContext.setLogLevel("ERROR")

source = read_all(spark, registered("source_orders", job="extract"))
lake = read_all(spark, registered("lake_orders"))
counts = (
    source.groupBy("dataid")
    .agg(F.count("*").alias("source"))
    .join(lake.groupBy("dataid").agg(F.count("*").alias("lake")), "dataid", "full_outer")
    .fillna(0)
    .collect()
)
shards = sorted(counts, key=lambda row: natural_key(row.dataid))
differ = [row for row in shards if row.source != row.lake]
total_source, total_lake = sum(r.source for r in shards), sum(r.lake for r in shards)
print(
    f"reconciliation: {len(shards)} shards, {len(shards) - len(differ)} match, "
    f"{len(differ)} differ (source {total_source} rows, lake {total_lake} rows)"
)
for row in differ:
    print(f"  shard {row.dataid}: source {row.source} rows, lake {row.lake} rows")
sys.exit(1 if differ else 0)
