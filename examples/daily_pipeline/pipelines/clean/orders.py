"""Transformations of the clean stage: each a plain function of DataFrames, each with
examples that ``utility validate`` runs. A frame of many days (a batch of chunks, its
column ``dataid``) keeps each row's day, and a day is cleaned on its own."""

from decimal import Decimal

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from dataflow.testing import example

RAW = "order_id STRING, store STRING, sku STRING, qty STRING, unit_price STRING"
TYPED = "order_id BIGINT, store STRING, sku STRING, qty INT, unit_price DECIMAL(10,2)"


def per_chunk(orders: DataFrame) -> list[str]:
    """``["dataid"]`` for a frame of many chunks (a batch), else nothing."""
    return ["dataid"] if "dataid" in orders.columns else []


@example(
    input=[
        {"order_id": "1", "store": "nyc", "sku": "A1", "qty": "2", "unit_price": "3.50"},
        {"order_id": "2", "store": "nyc", "sku": " ", "qty": "1", "unit_price": "1.00"},
        {"order_id": "3", "store": "nyc", "sku": "B2", "qty": "n/a", "unit_price": "1.00"},
        {"order_id": "4", "store": "sfo", "sku": "B2", "qty": "1", "unit_price": None},
    ],
    expected=[{"order_id": "1", "store": "nyc", "sku": "A1", "qty": "2", "unit_price": "3.50"}],
    schema=RAW,
    description="rows without a sku, a whole quantity or a price are dropped",
)
def drop_invalid(orders: DataFrame) -> DataFrame:
    return orders.where(
        (F.trim("sku") != "")
        & F.trim("qty").rlike(r"^\d+$")
        & F.trim("unit_price").rlike(r"^\d+(\.\d+)?$")
    )


@example(
    input=[{"order_id": " 7", "store": " nyc ", "sku": "a1", "qty": "2 ", "unit_price": "3.5"}],
    expected=[
        {"order_id": 7, "store": "NYC", "sku": "A1", "qty": 2, "unit_price": Decimal("3.50")}
    ],
    schema=RAW,
    description="trimmed, upper-case codes, typed numbers",
)
def normalise(orders: DataFrame) -> DataFrame:
    return orders.select(
        F.trim("order_id").cast("bigint").alias("order_id"),
        F.upper(F.trim("store")).alias("store"),
        F.upper(F.trim("sku")).alias("sku"),
        F.trim("qty").cast("int").alias("qty"),
        F.trim("unit_price").cast("decimal(10,2)").alias("unit_price"),
        *per_chunk(orders),
    )


@example(
    input=[
        {"order_id": 1, "store": "NYC", "sku": "A1", "qty": 2, "unit_price": Decimal("3.50")},
        {"order_id": 1, "store": "NYC", "sku": "A1", "qty": 2, "unit_price": Decimal("3.50")},
        {"order_id": 2, "store": "SFO", "sku": "B2", "qty": 1, "unit_price": Decimal("1.00")},
    ],
    expected=[
        {"order_id": 1, "store": "NYC", "sku": "A1", "qty": 2, "unit_price": Decimal("3.50")},
        {"order_id": 2, "store": "SFO", "sku": "B2", "qty": 1, "unit_price": Decimal("1.00")},
    ],
    schema=TYPED,
    description="an order the feed sent twice is kept once",
)
@example(
    input=[
        {"order_id": 1, "sku": "A1", "dataid": "2025-11-01"},
        {"order_id": 1, "sku": "A1", "dataid": "2025-11-01"},
        {"order_id": 1, "sku": "A1", "dataid": "2025-11-02"},
    ],
    expected=[
        {"order_id": 1, "sku": "A1", "dataid": "2025-11-01"},
        {"order_id": 1, "sku": "A1", "dataid": "2025-11-02"},
    ],
    schema="order_id BIGINT, sku STRING, dataid STRING",
    description="in a batch of days, each day is deduplicated on its own",
)
def deduplicate(orders: DataFrame) -> DataFrame:
    return orders.dropDuplicates([*per_chunk(orders), "order_id"])
