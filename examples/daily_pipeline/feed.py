#!/usr/bin/env python3
"""The upstream feed of the daily pipeline example: delivers one day's orders file.

    feed.py BASE DAY [--old-format | --late-orders]

writes BASE/landing/dataid=DAY/orders.csv (the chunk DAY of dataset ``landing``). The
rows are the same for a given day every time; a few are invalid or sent twice, as
real feeds do. ``--old-format`` delivers the file with a renamed column (the extract
job rejects it); ``--late-orders`` adds the orders that arrived after the first delivery.
"""

import csv
import random
import sys
from pathlib import Path

STORES = ["nyc", " sfo", "CHI ", "bos"]
SKUS = ["a1", "b2", "c3", "d4", "e5"]


def orders(day: str, late: bool) -> list[list[str]]:
    pick = random.Random(day)  # noqa: S311 - repeatable test data, not secrets
    rows = []
    count = 40 + (10 if late else 0)
    for number in range(1, count + 1):
        order_id = f"{day.replace('-', '')}{number:04d}"
        qty = str(pick.randint(1, 9))
        price = f"{pick.choice([1.5, 2.25, 3.0, 4.75, 9.99]):.2f}"
        rows.append([order_id, pick.choice(STORES), pick.choice(SKUS), qty, price])
    rows[3][2] = ""  # no sku
    rows[7][3] = "n/a"  # no quantity
    rows.append(list(rows[10]))  # sent twice
    return rows


def main(argv: list[str]) -> int:
    base, day, *flags = argv
    header = ["order_id", "store", "sku", "qty", "unit_price"]
    if "--old-format" in flags:
        header[3] = "quantity"
    folder = Path(base) / "landing" / f"dataid={day}"
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / "orders.csv", "w", newline="") as out:
        writer = csv.writer(out)
        writer.writerow(header)
        writer.writerows(orders(day, "--late-orders" in flags))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
