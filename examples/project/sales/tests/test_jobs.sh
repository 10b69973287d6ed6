#!/usr/bin/env bash
# The project's check (its [project] test): the job run on a sample day, as RunJob would.
set -euo pipefail
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
mkdir -p "$work/raw/dataid=d1"
printf 'order,amount\n1,2.50\n2,4.00\n' > "$work/raw/dataid=d1/orders.csv"
dataid=d1 orders_raw_schemaname=$work orders_raw_tablename=raw \
  orders_total_schemaname=$work orders_total_tablename=total bash jobs/total.sh > /dev/null
[ "$(cat "$work/total/dataid=d1/total.csv")" = "d1,6.50" ] || { echo "wrong total" >&2; exit 1; }
echo "ok: the total of a sample day"
