#!/usr/bin/env python3
"""Migration stage 1 (job ``extract``): one shard of the source table to landing Parquet.

The source is PostgreSQL through JDBC (the shard filter runs in the database, on its
index) or, on a machine without it, the embedded CSV source: the same code either way,
because where the shard lives is the dataset's metadata, not this script's business.
"""

from dataflow.spark import context, read, write

ctx = context()
spark = ctx.session()
write(read(spark, ctx.input("source_orders")), ctx.output("landing_orders"))
rows = read(spark, ctx.output("landing_orders")).count()
print(f"extract: shard {ctx.dataid}: {rows} rows landed")
