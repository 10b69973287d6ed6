#!/usr/bin/env bash
# Example (c) over HTTP: a producer on another machine POSTs orders with curl to
# `utility serve`; each lands in the landing folder as `utility drop` lands a file, the
# stream turns them into READY chunks, and the downstream batch job consumes them.
# Usage: examples/streaming/serve.sh   (DEMO_DIR overrides the scratch folder; needs curl)
set -euo pipefail
here=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
name=streaming-serve
. "$here/../common.sh"
rm -rf -- "$dir" && mkdir -p -- "$dir/data" && cd -- "$dir"
data=$dir/data
stream= server=

stop() { for pid in $stream $server; do kill -TERM -- "-$pid" 2>/dev/null || true; done; }
trap stop EXIT
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
post() {  # post TYPE DATA [curl options...]: what a producer runs, anywhere on the network
  local kind=$1 body=$2; shift 2
  printf '$ curl -sS -X POST %s/stream/landing -H "Authorization: Bearer $TOKEN" \\\n' "$url"
  printf '    -H "Content-Type: %s"' "$kind"
  [ $# -eq 0 ] || printf ' %s "%s"' "$@"
  printf " --data-binary '%s'\n" "$body"
  curl -sS -X POST "$url/stream/landing" -H "Authorization: Bearer $TOKEN" \
    -H "Content-Type: $kind" "$@" --data-binary "$body"
}

say "Register the landing folder, the datasets and the two jobs (store: $DATAFLOW_DB)"
show utility.sh createtables
show utility.sh register-dataset landing --database csv --schemaname "$data" --tablename landing
show utility.sh register-dataset clean --database parquet --schemaname "$data" --tablename clean
show utility.sh register-dataset totals --database parquet --schemaname "$data" --tablename totals
spark_args="--master local[1] --conf spark.ui.enabled=false --conf spark.ui.showConsoleProgress=false"
spark_args+=" --conf spark.sql.shuffle.partitions=1 --conf spark.log.level=ERROR"
spark_args+=" --driver-java-options \"-XX:TieredStopAtLevel=1 -XX:+UseSerialGC\""
show utility.sh register-job clean_stream --in landing --out clean --set "spark_args=$spark_args"
show utility.sh register-job store_totals --in clean --out totals --set "spark_args=$spark_args"
for job in clean_stream store_totals; do ln -s "$here/$job.py" .; done

say "Start the server: a token in a file, items only under --landing-root, 127.0.0.1 unless --host says otherwise"
"$python" -c 'import secrets; print(secrets.token_urlsafe(32))' >token && chmod 600 token
printf '$ utility.sh serve --port 0 --token-file token --landing-root data > serve.log &\n'
setsid utility.sh serve --port 0 --token-file token --landing-root "$data" >serve.log 2>&1 &
server=$!
for _ in $(seq 200); do
  grep -q "^serving http" serve.log && break
  kill -0 "$server" 2>/dev/null || { echo "the server did not start:" >&2; cat serve.log >&2; exit 1; }
  sleep 0.1
done
head -1 serve.log
url=$(sed -n 's/^serving \(http:[^ ]*\): .*/\1/p' serve.log)
TOKEN=$(cat token)

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

say "One order POSTed as JSON: answered 202 once it is on disk, cleaned, READY"
post application/json '{"order_id": "1001", "store": "nyc", "sku": "a1", "qty": "2", "unit_price": "3.50"}'
wait_for_orders 1
show chunks

say "Three orders in one CSV body with an Idempotency-Key; the producer retries it: it lands once"
mkdir -p outbox
printf 'order_id,store,sku,qty,unit_price\n1002, sfo,b2,1,9.99\n1003,nyc,,4,1.50\n1004,CHI,c3,3,2.25\n' >outbox/orders.csv
show cat outbox/orders.csv
post text/csv @outbox/orders.csv -H "Idempotency-Key: batch-1002-1004"
post text/csv @outbox/orders.csv -H "Idempotency-Key: batch-1002-1004"  # its answer was lost, say
wait_for_orders 3 1

say "The downstream batch job consumes the stream's chunks like daily chunks"
show RunJob --all ./store_totals.py

say "A mistake is refused whole, in one line, and lands nothing"
post application/json '{"order_id": "1005", "store": "nyc"'
printf '$ curl -sS -X POST %s/stream/landing --data-binary ...   # no token\n' "$url"
curl -sS -X POST "$url/stream/landing" -H "Content-Type: application/json" --data-binary '{}'
show ls data/landing

say "The same status the CLI prints, over HTTP (GET / is the live board)"
printf '$ curl -sS %s/api/status -H "Authorization: Bearer $TOKEN"\n' "$url"
curl -sS "$url/api/status" -H "Authorization: Bearer $TOKEN" \
  | "$python" -c 'import json, sys; [print(r["jobid"], r["ready"], "READY") for r in json.load(sys.stdin)]'

say "Final state"
show chunks
stop
wait "$stream" "$server" 2>/dev/null || true
stream= server=
say "The server's log: one line a request (never a body, a query or the token)"
cat serve.log
printf '\nDone. Folder: %s (store dataflow.db, data in data/, stream.log, serve.log)\n' "$dir"
