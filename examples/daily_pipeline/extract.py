#!/usr/bin/env python3
"""Stage 1 (job ``extract``): the day's landing CSV, as delivered, to Parquet.

Run by ``RunJob ./extract.py``: the chunk (``dataid`` = the day) and the datasets'
locations come from the store, nothing is hard-coded here. A file whose columns are
not the agreed ones fails the job, so nothing downstream sees that day.
"""

from dataflow.spark import context, read, write

COLUMNS = ["order_id", "store", "sku", "qty", "unit_price"]

ctx = context()
spark = ctx.session()
orders = read(spark, ctx.input("landing"))  # csv with a header: every column is text
if orders.columns != COLUMNS:
    raise SystemExit(
        f"extract: the landing file of {ctx.dataid} has columns {orders.columns}, "
        f"expected {COLUMNS}: ask the feed to redeliver it"
    )
write(orders, ctx.output("raw"))
print(f"extract: {orders.count()} rows of {ctx.dataid} landed in {ctx.output('raw').table_path}")
