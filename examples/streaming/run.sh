#!/usr/bin/env bash
# Example (c): a stream. Orders dropped into a landing folder one by one are cleaned by
# the daily pipeline's own transformations, each micro-batch becoming one READY chunk,
# which a downstream batch job consumes like any daily chunk.
# Usage: examples/streaming/run.sh   (DEMO_DIR overrides the scratch folder)
set -euo pipefail
here=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
name=streaming
. "$here/../common.sh"
rm -rf -- "$dir" && mkdir -p -- "$dir/data" && cd -- "$dir"
data=$dir/data
stream=

stop_stream() { [ -z "$stream" ] || kill -TERM -- "-$stream" 2>/dev/null || true; }
trap stop_stream EXIT
orders() { "$python" "$here/order.py" "$dir/outbox" "$@"; }
wait_for_orders() {  # until the stream has written $1 clean orders in all
  for _ in $(seq 600); do
    kill -0 "$stream" 2>/dev/null || { echo "the stream stopped:" >&2; tail -20 stream.log >&2; exit 1; }
    written=$(awk '/^clean_stream: batch/ {n += $(NF - 3)} END {print n + 0}' stream.log)
    [ "$written" -ge "$1" ] && break
    sleep 0.5
  done
  grep '^clean_stream: batch' stream.log | tail -n +"$((${2:-0} + 1))"
}
chunks() { utility.sh sql "select jobid, dataid, status from datastatus
  where locktype = 'OUT' order by jobid, length(dataid), dataid"; }

say "Register the landing folder, the datasets and the two jobs (store: $DATAFLOW_DB)"
show utility.sh createtables
show utility.sh register-dataset landing --database csv --schemaname "$data" --tablename landing
show utility.sh register-dataset clean --database parquet --schemaname "$data" --tablename clean
show utility.sh register-dataset totals --database parquet --schemaname "$data" --tablename totals
# small, short jobs: one core, no UI, and a JVM that starts quicker (C1 JIT, serial GC)
spark_args="--master local[1] --conf spark.ui.enabled=false --conf spark.ui.showConsoleProgress=false"
spark_args+=" --conf spark.sql.shuffle.partitions=1 --conf spark.log.level=ERROR"
spark_args+=" --driver-java-options \"-XX:TieredStopAtLevel=1 -XX:+UseSerialGC\""
show utility.sh register-job clean_stream --in landing --out clean --set "spark_args=$spark_args"
show utility.sh register-job store_totals --in clean --out totals --set "spark_args=$spark_args"
for job in clean_stream store_totals; do ln -s "$here/$job.py" .; done

say "Start the stream: it runs until stopped, every micro-batch one chunk of clean"
printf '$ utility.sh stream ./clean_stream.py > stream.log &\n'
setsid utility.sh stream ./clean_stream.py >stream.log 2>&1 &
stream=$!
for _ in $(seq 600); do
  grep -q "watching the landing folder" stream.log && break
  kill -0 "$stream" 2>/dev/null || { echo "the stream did not start:" >&2; cat stream.log >&2; exit 1; }
  sleep 0.5
done
grep "watching" stream.log

say "One incoming order: dropped whole into the landing folder, cleaned, READY"
orders 1001 nyc a1 2 3.50 >/dev/null
show utility.sh drop landing outbox/order-1001.csv
wait_for_orders 1
show chunks

say "Three more orders arrive together; one has no sku and is cleaned away"
orders 1002 " sfo" b2 1 9.99 1003 nyc "" 4 1.50 1004 CHI c3 3 2.25 >/dev/null
show utility.sh drop landing outbox/order-1002.csv outbox/order-1003.csv outbox/order-1004.csv
wait_for_orders 3 1

say "The downstream batch job consumes the stream's chunks like daily chunks"
show RunJob --all ./store_totals.py
show utility.sh log store_totals 1

say "A late order while the stream runs: the next RunJob takes only the new chunk"
orders 1005 nyc d4 1 4.75 >/dev/null
show utility.sh drop landing outbox/order-1005.csv
before=$(grep -c '^clean_stream: batch' stream.log)
wait_for_orders 4 "$before"
show RunJob --all ./store_totals.py

say "Final state"
show chunks
stop_stream
wait "$stream" 2>/dev/null || true
stream=
printf '\nDone. Folder: %s (store dataflow.db, data in data/, the stream'"'"'s output in stream.log)\n' "$dir"
