"""The aggregate stage: a day's clean orders to one row per store (per store and day for
a frame of many days, a batch of chunks with its column ``dataid``)."""

from decimal import Decimal

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from dataflow.testing import example


@example(
    input=[
        {"order_id": 1, "store": "NYC", "sku": "A1", "qty": 2, "unit_price": Decimal("3.50")},
        {"order_id": 2, "store": "NYC", "sku": "B2", "qty": 1, "unit_price": Decimal("1.00")},
        {"order_id": 3, "store": "SFO", "sku": "A1", "qty": 5, "unit_price": Decimal("3.50")},
    ],
    expected=[
        {"store": "NYC", "orders": 2, "units": 3, "revenue": Decimal("8.00")},
        {"store": "SFO", "orders": 1, "units": 5, "revenue": Decimal("17.50")},
    ],
    schema="order_id BIGINT, store STRING, sku STRING, qty INT, unit_price DECIMAL(10,2)",
)
def per_store(orders: DataFrame) -> DataFrame:
    per_chunk = ["dataid"] if "dataid" in orders.columns else []
    return orders.groupBy(*per_chunk, "store").agg(
        F.count("*").alias("orders"),
        F.sum("qty").alias("units"),
        F.sum(F.col("qty") * F.col("unit_price")).cast("decimal(12,2)").alias("revenue"),
    )
