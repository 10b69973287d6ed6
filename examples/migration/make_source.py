#!/usr/bin/env python3
"""The embedded source of the migration example, for a machine without PostgreSQL.

    make_source.py FOLDER SHARDS ROWS

writes the same orders as source.sql would hold, one CSV file per shard, in
FOLDER/orders/dataid=<shard>/orders.csv: the layout of a file dataset's chunks.
"""

import csv
import sys
from pathlib import Path

COLUMNS = ["order_id", "shard", "customer", "amount", "ordered_at"]


def order(order_id: int, shards: int) -> list[str]:
    """Order ``order_id``; the same values as source.sql computes."""
    shard = (order_id - 1) % shards + 1
    amount = f"{(order_id * 37) % 10000 / 100:.2f}"
    day = (order_id * 7) % 28 + 1
    return [
        str(order_id),
        str(shard),
        f"customer-{order_id % 97}",
        amount,
        f"2024-02-{day:02d} 12:00:00",
    ]


def main(folder: str, shards: str, rows: str) -> int:
    count, per_shard = int(shards), int(rows)
    files = {}
    try:
        for shard in range(1, count + 1):
            path = Path(folder) / "orders" / f"dataid={shard}"
            path.mkdir(parents=True, exist_ok=True)
            files[shard] = open(path / "orders.csv", "w", newline="")  # noqa: SIM115
            csv.writer(files[shard]).writerow(COLUMNS)
        for order_id in range(1, count * per_shard + 1):
            row = order(order_id, count)
            csv.writer(files[int(row[1])]).writerow(row)
    finally:
        for file in files.values():
            file.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
