#!/usr/bin/env python3
"""Stage 1 (job ``extract``): the day's landing CSV, as delivered, to Parquet.

Run by RunJob: the chunk (``dataid`` = the day) and the datasets' locations come from
the store, nothing is hard-coded here. A file whose columns are not the agreed ones
fails its day, so nothing downstream sees that day.

``RunJob ./extract.py`` runs the next day alone (``run``); ``RunJob --all ./extract.py``
catches up on every waiting day in one Spark driver, up to 20 days per query
(``run_batch``). A bad file fails its batch, which is split until that day fails
alone: the other days of the batch end READY.
"""

from dataflow.spark import context, read, write

COLUMNS = ["order_id", "store", "sku", "qty", "unit_price"]


def checked(spark, job):
    """The day's landing file (csv with a header: every column is text), if its columns
    are the agreed ones."""
    orders = read(spark, job.input("landing"))
    if orders.columns != COLUMNS:
        raise SystemExit(
            f"extract: the landing file of {job.dataid} has columns {orders.columns}, "
            f"expected {COLUMNS}: ask the feed to redeliver it"
        )
    return orders


def run_batch(spark, batch):
    for day in batch.chunks:  # each file's own header, before one query reads them all
        checked(spark, day)
    orders = read(spark, batch.input("landing"))  # with a column dataid: the day
    write(orders, batch.output("raw"))
    for day, rows in sorted(orders.groupBy("dataid").count().collect()):
        print(f"extract: {rows} rows of {day} landed in {batch.output('raw').chunks[0].table_path}")


def run(spark, job):
    orders = checked(spark, job)
    write(orders, job.output("raw"))
    print(
        f"extract: {orders.count()} rows of {job.dataid} landed in {job.output('raw').table_path}"
    )


if __name__ == "__main__":  # spark-submit extract.py, by hand, with a chunk's environment
    ctx = context()
    run(ctx.session(), ctx)
