#!/usr/bin/env bash
# The day's total of orders_raw (amounts in the 2nd column) into orders_total.
set -euo pipefail
in="$orders_raw_schemaname/$orders_raw_tablename/dataid=$dataid/orders.csv"
out="$orders_total_schemaname/$orders_total_tablename/dataid=$dataid"
mkdir -p "$out"
awk -F, 'NR > 1 { total += $2 } END { printf "%s,%.2f\n", day, total }' day="$dataid" "$in" > "$out/total.csv"
echo "total of $dataid: $(cut -d, -f2 "$out/total.csv")"
