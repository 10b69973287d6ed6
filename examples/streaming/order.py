#!/usr/bin/env python3
"""Write incoming orders as items, one CSV file each (what a web shop would send):

order.py FOLDER ORDER_ID STORE SKU QTY UNIT_PRICE [ORDER_ID ...]
"""

import sys
from pathlib import Path

HEADER = "order_id,store,sku,qty,unit_price"


def main(argv: list[str]) -> int:
    folder, fields = Path(argv[0]), argv[1:]
    folder.mkdir(parents=True, exist_ok=True)
    for at in range(0, len(fields), 5):
        order = fields[at : at + 5]
        item = folder / f"order-{order[0]}.csv"
        item.write_text(f"{HEADER}\n{','.join(order)}\n")
        print(item)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
